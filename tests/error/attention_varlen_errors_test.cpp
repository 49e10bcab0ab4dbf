// Error tests of the varlen attention host API: each test breaks one thing in an otherwise valid
// forward_varlen call and asserts that validate_varlen_args (no GPU needed: the addresses are never
// dereferenced), check_varlen_offsets (the offsets' contents, as forward_varlen checks its host copy) or
// forward_varlen raises a kiln::Error that names what was expected and what came.
#include "error/error_test_support.h"
#include "kernels/attention/attention_mod_library.h"
#include "kernels/attention/attention_varlen_api.h"
#include "kernels/attention/fa2_fwd_varlen.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace kiln;
using namespace kiln::attention;
using kiln_test::expect_call_site;
using kiln_test::expect_mentions;
using kiln_test::user_error;

namespace {

struct Call {
  TensorRef q, k, v, o;
  std::optional<TensorRef> lse;
  VarlenBatch batch;
  AttentionOptions options;
};

// Three sequences, q lengths {5, 0, 40} (total 45), k lengths {7, 30, 0} (total 37), H=4, H_KV=2, D=64, f16,
// contiguous, at distinct 16-byte aligned fake addresses far apart.
Call valid_call(DType dtype = DType::f16) {
  Call c;
  c.q = TensorRef::contiguous(0x10000000, dtype, {45, 4, 64});
  c.k = TensorRef::contiguous(0x20000000, dtype, {37, 2, 64});
  c.v = TensorRef::contiguous(0x30000000, dtype, {37, 2, 64});
  c.o = TensorRef::contiguous(0x40000000, dtype, {45, 4, 64});
  c.lse = TensorRef::contiguous(0x50000000, DType::f32, {4, 45});
  c.batch.cu_seqlens_q = TensorRef::contiguous(0x60000000, DType::i32, {4});
  c.batch.cu_seqlens_k = TensorRef::contiguous(0x70000000, DType::i32, {4});
  c.batch.max_seqlen_q = 40;
  c.batch.max_seqlen_k = 30;
  return c;
}
const std::vector<int32_t> kCuQ = {0, 5, 5, 45}, kCuK = {0, 7, 37, 37};

ValidatedVarlen validate(const Call& c) {
  return validate_varlen_args(c.q, c.k, c.v, c.o, c.lse, c.batch, c.options);
}
std::string validation_error(const Call& c) {
  return user_error([&] { validate(c); });
}
std::string offsets_error(const std::vector<int32_t>& cu_q, const std::vector<int32_t>& cu_k) {
  const ValidatedVarlen v = validate(valid_call());
  return user_error([&] { check_varlen_offsets(v, cu_q, cu_k); });
}

TEST(AttentionVarlenErrors, ValidCallPasses) {
  const Call c = valid_call();
  const ValidatedVarlen v = validate(c);
  EXPECT_FALSE(v.empty);
  EXPECT_EQ(v.sizes.B, 3);
  EXPECT_EQ(v.sizes.total_q, 45);
  EXPECT_EQ(v.sizes.total_k, 37);
  EXPECT_EQ(v.strides.q.token, 256);
  EXPECT_EQ(v.strides.k.head, 64);
  EXPECT_NO_THROW(check_varlen_offsets(v, kCuQ, kCuK));
}

TEST(AttentionVarlenErrors, MessageCarriesCallersLine) {
  Call c = valid_call();
  c.batch.cu_seqlens_q.dtype = DType::i64;
  const unsigned line = __LINE__ + 2;
  const std::string msg =
      user_error([&] { validate_varlen_args(c.q, c.k, c.v, c.o, c.lse, c.batch, c.options); });
  expect_call_site(msg, line);
  expect_mentions(msg, {"attention::forward_varlen"});
}

TEST(AttentionVarlenErrors, PackedTensorsHaveRankThree) {
  Call c = valid_call();
  c.q = TensorRef::contiguous(c.q.data, DType::f16, {1, 45, 4, 64});
  expect_mentions(validation_error(c), {"q must have rank 3 [total, heads, D]", "got rank 4"});
}

TEST(AttentionVarlenErrors, LseIsHeadsByTotalQ) {
  Call c = valid_call();
  c.lse = TensorRef::contiguous(0x50000000, DType::f32, {45, 4});
  expect_mentions(validation_error(c), {"lse has shape [45, 4]", "expected [H, total_q] = [4, 45]"});
  c.lse = TensorRef::contiguous(0x50000000, DType::f32, {1, 4, 45});
  expect_mentions(validation_error(c), {"lse must have rank 2 [H, total_q]"});
  c.lse = TensorRef{0x50000000, DType::f32, {4, 45}, {1, 4}};
  expect_mentions(validation_error(c), {"lse has strides [1, 4]", "contiguous strides [45, 1]"});
}

TEST(AttentionVarlenErrors, OffsetsOfWrongDtype) {
  Call c = valid_call();
  c.batch.cu_seqlens_k.dtype = DType::i64;
  expect_mentions(validation_error(c), {"batch.cu_seqlens_k has dtype i64", "expected i32 offsets"});
}

TEST(AttentionVarlenErrors, OffsetsOfWrongRankOrLength) {
  Call c = valid_call();
  c.batch.cu_seqlens_q = TensorRef::contiguous(0x60000000, DType::i32, {4, 1});
  expect_mentions(validation_error(c), {"batch.cu_seqlens_q must have rank 1 [B + 1]", "got rank 2"});
  c = valid_call();
  c.batch.cu_seqlens_k = TensorRef::contiguous(0x70000000, DType::i32, {5});
  expect_mentions(validation_error(c), {"cu_seqlens_q has 4 offsets but batch.cu_seqlens_k has 5", "B + 1"});
  c = valid_call();
  c.batch.cu_seqlens_q = TensorRef::contiguous(0x60000000, DType::i32, {0});
  expect_mentions(validation_error(c), {"batch.cu_seqlens_q is empty", "at least the leading 0"});
}

TEST(AttentionVarlenErrors, OffsetsNotSet) {
  Call c = valid_call();
  c.batch.cu_seqlens_q = TensorRef{};
  expect_mentions(validation_error(c), {"batch.cu_seqlens_q must have rank 1 [B + 1]", "got rank 0"});
}

TEST(AttentionVarlenErrors, OffsetsNotContiguousNullOrMisaligned) {
  Call c = valid_call();
  c.batch.cu_seqlens_q.strides = {2};
  expect_mentions(validation_error(c), {"batch.cu_seqlens_q has stride 2", "contiguous"});
  c = valid_call();
  c.batch.cu_seqlens_k.data = 0;
  expect_mentions(validation_error(c), {"batch.cu_seqlens_k has a null data address"});
  c = valid_call();
  c.batch.cu_seqlens_k.data = 0x70000002;
  expect_mentions(validation_error(c), {"cu_seqlens_k's address 0x70000002 is not 4-byte aligned"});
}

TEST(AttentionVarlenErrors, MaxSeqlenNegativeOrZeroWithRows) {
  Call c = valid_call();
  c.batch.max_seqlen_k = -1;
  expect_mentions(validation_error(c), {"batch.max_seqlen_k is -1", ">= 0"});
  c = valid_call();
  c.batch.max_seqlen_q = 0;
  expect_mentions(validation_error(c), {"batch.max_seqlen_q is 0 but q holds 45 rows"});
  c.batch.max_seqlen_q = int64_t{1} << 31;
  expect_mentions(validation_error(c), {"batch.max_seqlen_q=2147483648 is too large"});
}

TEST(AttentionVarlenErrors, KeyAndValueShapesDiffer) {
  Call c = valid_call();
  c.v = TensorRef::contiguous(c.v.data, DType::f16, {36, 2, 64});
  expect_mentions(validation_error(c), {"v has shape [36, 2, 64] but k has [37, 2, 64]"});
}

TEST(AttentionVarlenErrors, HeadsAndHeadDim) {
  Call c = valid_call();
  c.k = TensorRef::contiguous(c.k.data, DType::f16, {37, 3, 64});
  c.v = TensorRef::contiguous(c.v.data, DType::f16, {37, 3, 64});
  expect_mentions(validation_error(c), {"q has H=4 heads, not a multiple of k/v's H_KV=3"});
  c = valid_call();
  c.o = TensorRef::contiguous(c.o.data, DType::f16, {45, 4, 32});
  expect_mentions(validation_error(c), {"o has shape [45, 4, 32]; expected q's shape [45, 4, 64]"});
  c = valid_call();
  for (TensorRef* t : {&c.q, &c.o})
    *t = TensorRef::contiguous(t->data, DType::f16, {45, 4, 60});
  for (TensorRef* t : {&c.k, &c.v})
    *t = TensorRef::contiguous(t->data, DType::f16, {37, 2, 60});
  expect_mentions(validation_error(c), {"head dim D=60 is not supported", "multiple of 8"});
}

TEST(AttentionVarlenErrors, DtypesDiffer) {
  Call c = valid_call();
  c.v.dtype = DType::bf16;
  expect_mentions(validation_error(c), {"v has dtype bf16 but q has f16"});
  c = valid_call();
  c.lse->dtype = DType::f16;
  expect_mentions(validation_error(c), {"lse has dtype f16; expected f32"});
}

TEST(AttentionVarlenErrors, TokenStrideMisaligned) {
  Call c = valid_call();
  c.q.strides = {260, 64, 1}; // 520 bytes a token
  expect_mentions(validation_error(c), {"q's stride 260 in dim 0 is 520 bytes, not a multiple of 16"});
}

TEST(AttentionVarlenErrors, HeadDimNotContiguous) {
  Call c = valid_call();
  c.k.strides = {256, 128, 2};
  expect_mentions(validation_error(c), {"k's head dim is not contiguous: stride 2"});
}

TEST(AttentionVarlenErrors, OutputsOverlapInputsOrOffsets) {
  Call c = valid_call();
  c.o.data = c.q.data;
  expect_mentions(validation_error(c), {"o (bytes", "overlaps q"});
  c = valid_call();
  c.lse->data = c.batch.cu_seqlens_k.data;
  expect_mentions(validation_error(c), {"lse (bytes", "overlaps cu_seqlens_k"});
  c = valid_call();
  c.lse->data = c.o.data + 256;
  expect_mentions(validation_error(c), {"lse (bytes", "overlaps o"});
}

TEST(AttentionVarlenErrors, LayoutIsNotForPackedTensors) {
  Call c = valid_call();
  c.options.layout = "bshd";
  expect_mentions(validation_error(c), {"options.layout is \"bshd\"", "packed tensors have one layout"});
}

// Mods on a packed batch (attention_varlen_mods.h): their tensors are indexed per sequence, so a dim N_Q or
// N_K runs along max_seqlen_q or max_seqlen_k (40 and 30 here) and B along the sequences (3), not along the
// packed totals (45 and 37).
TEST(AttentionVarlenErrors, ModTensorsAreSizedByTheLongestSequences) {
  Call c = valid_call();
  c.options.mods.score.push_back(additive_bias());
  c.options.mod_tensors["bias"] = TensorRef::contiguous(0x90000000, DType::f32, {3, 4, 40, 30});
  const ValidatedVarlen v = validate(c);
  ASSERT_EQ(v.mod_tensors.size(), 1u);
  EXPECT_EQ(v.mod_tensors[0].strides, (std::vector<int64_t>{4 * 40 * 30, 40 * 30, 30, 1}));
  c.options.mod_tensors["bias"] = TensorRef::contiguous(0x90000000, DType::f32, {3, 4, 45, 37});
  expect_mentions(validation_error(c),
                  {"attention::forward_varlen", "mod tensor 'bias' has extent 45 in dim 2 (N_Q)",
                   "expected 40 or 1", "[B=3, H=4, N_Q=40, N_K=30]"});
  c = valid_call();
  c.options.mods.mask.push_back(document_mask());
  c.options.mod_tensors["q_doc"] = TensorRef::contiguous(0x90000000, DType::i32, {1, 45}); // packed ids
  c.options.mod_tensors["kv_doc"] = TensorRef::contiguous(0x98000000, DType::i32, {3, 30});
  expect_mentions(validation_error(c),
                  {"mod tensor 'q_doc' has extent 45 in dim 1 (N_Q)", "expected 40 or 1"});
}

TEST(AttentionVarlenErrors, ModsAsForwardChecksThem) {
  Call c = valid_call();
  c.options.mods.score.push_back(alibi());
  expect_mentions(validation_error(c), {"attention::forward_varlen", "read a tensor 'alibi_slopes'",
                                        "which options.mod_tensors does not hold"});
  c.options.mod_tensors["alibi_slopes"] = TensorRef::contiguous(0x40000000, DType::f32, {4}); // inside o
  expect_mentions(validation_error(c), {"mod tensor 'alibi_slopes'", "overlaps o"});
  c = valid_call();
  c.options.mods.mask.push_back(sliding_window(8, 0));
  c.options.exact_masked_v = true;
  expect_mentions(validation_error(c),
                  {"options.exact_masked_v", "expected exact_masked_v = false with mask mods"});
  c = valid_call();
  c.options.mod_tensors["bias"] = TensorRef::contiguous(0x90000000, DType::f32, {3, 4, 40, 30});
  expect_mentions(validation_error(c), {"options.mod_tensors holds 'bias', but options.mods is empty"});
}

TEST(AttentionVarlenErrors, ConfigOfTheKernelWithMods) {
  Call c = valid_call();
  c.options.mods.mask.push_back(sliding_window(8, 0));
  Config config = default_fa2_varlen_config(VarlenProblem{{5, 0, 40}, {7, 30, 0}, 4, 2, 64});
  c.options.config = config;
  EXPECT_NO_THROW(validate(c));
  config.params.erase("VARLEN");
  config.set("WARP_SPECIALIZE", 1);
  c.options.config = config;
  expect_mentions(validation_error(c), {"options.config", "expected an fa2_fwd_varlen config"});
}

TEST(AttentionVarlenErrors, GridTooTallForSequencesTimesHeads) {
  Call c = valid_call();
  c.batch.cu_seqlens_q = TensorRef::contiguous(0x60000000, DType::i32, {20000});
  c.batch.cu_seqlens_k = TensorRef::contiguous(0x70000000, DType::i32, {20000});
  expect_mentions(validation_error(c), {"B * H = 19999 * 4 = 79996 exceeds 65535"});
}

TEST(AttentionVarlenErrors, ConfigMustBeAVarlenConfig) {
  Call c = valid_call();
  const ValidatedVarlen v = validate(c);
  c.options.config = default_fa2_config(v.shape); // the dense kernel's: WARP_SPECIALIZE, no VARLEN
  expect_mentions(validation_error(c), {"options.config", "fa2_fwd_varlen"});
  Config varlen = varlen_config(default_fa2_config(v.shape));
  varlen.set("HEAD_DIM", 128);
  c.options.config = varlen;
  expect_mentions(validation_error(c), {"options.config", "HEAD_DIM=128", "needs HEAD_DIM=64"});
  c.options.config = varlen_config(default_fa2_config(v.shape));
  EXPECT_NO_THROW(validate(c));
}

TEST(AttentionVarlenErrors, EmptyBatchesAreValidNoOps) {
  Call c = valid_call();
  c.batch.cu_seqlens_q = TensorRef::contiguous(0x60000000, DType::i32, {1});
  c.batch.cu_seqlens_k = TensorRef::contiguous(0x70000000, DType::i32, {1});
  EXPECT_TRUE(validate(c).empty);
  c = valid_call();
  for (TensorRef* t : {&c.q, &c.o})
    *t = TensorRef::contiguous(t->data, DType::f16, {0, 4, 64});
  c.lse = TensorRef::contiguous(c.lse->data, DType::f32, {4, 0});
  EXPECT_TRUE(validate(c).empty);
  // No keys at all (every sequence empty in k): valid, k and v never read, whatever their addresses.
  c = valid_call();
  for (TensorRef* t : {&c.k, &c.v})
    *t = TensorRef::contiguous(0, DType::f16, {0, 2, 64});
  EXPECT_FALSE(validate(c).empty);
}

TEST(AttentionVarlenErrors, OffsetsNotStartingAtZero) {
  expect_mentions(offsets_error({1, 5, 5, 45}, kCuK), {"cu_seqlens_q[0] is 1; expected 0"});
}

TEST(AttentionVarlenErrors, OffsetsDecreasing) {
  expect_mentions(offsets_error(kCuQ, {0, 7, 3, 37}),
                  {"cu_seqlens_k[2] = 3 is below cu_seqlens_k[1] = 7", "non-decreasing"});
}

TEST(AttentionVarlenErrors, OffsetsNotEndingAtTheTokenCount) {
  expect_mentions(offsets_error({0, 5, 5, 44}, kCuK),
                  {"cu_seqlens_q[B] = 44 but q holds 45 tokens", "view of the first"});
}

TEST(AttentionVarlenErrors, SequenceLongerThanMaxSeqlen) {
  // q lengths {5, 0, 40} against max_seqlen_q = 40 pass; {5, 1, 39} too; {4, 0, 41} does not.
  expect_mentions(offsets_error({0, 4, 4, 45}, kCuK),
                  {"sequence 2 has 41 tokens", "batch.max_seqlen_q is 40", "max_seqlen_q >= every sequence"});
  expect_mentions(offsets_error(kCuQ, {0, 6, 37, 37}),
                  {"sequence 1 has 31 tokens", "batch.max_seqlen_k is 30"});
}

TEST(AttentionVarlenErrors, OffsetsOfTheWrongCount) {
  expect_mentions(offsets_error({0, 45}, kCuK), {"cu_seqlens_q holds 2 offsets; expected B + 1 = 4"});
}

TEST(AttentionVarlenErrors, ForwardValidatesBeforeTouchingTheGpu) {
  Call c = valid_call();
  c.o.data = c.k.data;
  expect_mentions(user_error([&] { forward_varlen(c.q, c.k, c.v, c.o, c.lse, c.batch, c.options); }),
                  {"attention::forward_varlen", "o (bytes", "overlaps k"});
}

} // namespace
