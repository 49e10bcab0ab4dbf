// Error tests of the attention backward's host API: each test breaks one thing in an otherwise valid
// backward call and asserts that validate_attention_bwd_args (no GPU needed: the addresses are never
// dereferenced) or backward raises a kiln::Error that starts "attention::backward:" and names what was
// expected and what came. The forward's checks of q, k, v, o, lse are tested in attention_api_errors_test.
#include "error/attention_bwd_call.h"
#include "error/error_test_support.h"
#include "kernels/attention/attention_bwd_api.h"
#include "kernels/attention/attention_bwd_problem.h"
#include "kernels/attention/fa2_bwd_dkdv.h"

#include <gtest/gtest.h>

using namespace kiln;
using namespace kiln::attention;
using kiln_test::expect_call_site;
using kiln_test::expect_mentions;
using kiln_test::user_error;
using kiln_test::BwdCall;
using kiln_test::valid_bwd_call;

namespace {

ValidatedBackward validate(const BwdCall& c) {
  return validate_attention_bwd_args(c.q, c.k, c.v, c.o, c.lse, c.dout, c.dq, c.dk, c.dv, c.options);
}

std::string validation_error(const BwdCall& c) {
  std::string msg = user_error([&] { validate(c); });
  expect_mentions(msg, {"attention::backward: "});
  return msg;
}

AttentionProblem problem_of(const BwdCall& c) { return validate(c).fwd.problem; }

TEST(AttentionBwdApiErrors, ValidCallPasses) {
  BwdCall c = valid_bwd_call();
  ValidatedBackward b;
  ASSERT_NO_THROW(b = validate(c));
  EXPECT_EQ(b.fwd.problem.H_KV, 2);
  EXPECT_EQ(b.dk_data, c.dk.data);
  EXPECT_EQ(b.dq.n, 64);
  c.options.deterministic = false;
  c.options.config = default_bwd_configs(b.fwd.problem, /*atomic_dq=*/true).dkdv;
  EXPECT_NO_THROW(validate(c));
}

TEST(AttentionBwdApiErrors, MessageNamesBackwardAndCarriesCallersLine) {
  BwdCall c = valid_bwd_call();
  c.lse.dtype = DType::f16; // one of the forward's checks, reported for the backward
  const unsigned line = __LINE__ + 1;
  auto call = [&] { validate_attention_bwd_args(c.q, c.k, c.v, c.o, c.lse, c.dout, c.dq, c.dk, c.dv); };
  std::string msg = user_error(call);
  expect_mentions(msg, {"attention::backward: lse has dtype f16", "expected f32"});
  EXPECT_EQ(msg.find("attention::forward"), std::string::npos) << msg;
  expect_call_site(msg, line);
}

TEST(AttentionBwdApiErrors, LseRankIsCheckedAsTheForwardDoes) {
  BwdCall c = valid_bwd_call();
  c.lse = TensorRef::contiguous(c.lse.data, DType::f32, {2, 4, 64, 1});
  expect_mentions(validation_error(c), {"lse must have rank 3 [B, H, N_Q]"});
}

TEST(AttentionBwdApiErrors, DoutRankNotFour) {
  BwdCall c = valid_bwd_call();
  c.dout = TensorRef::contiguous(c.dout.data, DType::f16, {2, 4, 64});
  expect_mentions(validation_error(c), {"dout must have rank 4 [B, H, N, D]", "got rank 3"});
}

TEST(AttentionBwdApiErrors, DoutDtypeDiffers) {
  BwdCall c = valid_bwd_call();
  c.dout.dtype = DType::bf16;
  expect_mentions(validation_error(c), {"dout has dtype bf16 but q has f16", "the inputs' dtype"});
}

TEST(AttentionBwdApiErrors, DoutShapeDiffers) {
  BwdCall c = valid_bwd_call();
  c.dout = TensorRef::contiguous(c.dout.data, DType::f16, {2, 4, 63, 64});
  expect_mentions(validation_error(c),
                  {"dout has shape [2, 4, 63, 64]", "expected q's shape [2, 4, 64, 64]"});
}

TEST(AttentionBwdApiErrors, DoutHeadDimNotContiguous) {
  BwdCall c = valid_bwd_call();
  c.dout.strides = {64 * 64 * 4 * 2, 64 * 64 * 2, 128, 2};
  expect_mentions(validation_error(c), {"dout's head dim is not contiguous", "stride 2"});
}

TEST(AttentionBwdApiErrors, DoutMisalignedAddress) {
  BwdCall c = valid_bwd_call();
  c.dout.data += 8;
  expect_mentions(validation_error(c), {"dout's address 0x60000008 is not 16-byte aligned"});
}

TEST(AttentionBwdApiErrors, DqRowStrideMisaligned) {
  BwdCall c = valid_bwd_call();
  c.dq.strides[2] = 68; // rows 136 bytes apart
  expect_mentions(validation_error(c), {"dq's stride 68 in dim 2 is 136 bytes, not a multiple of 16"});
}

TEST(AttentionBwdApiErrors, DqShapeDiffers) {
  BwdCall c = valid_bwd_call();
  c.dq = TensorRef::contiguous(c.dq.data, DType::f16, {2, 2, 64, 64});
  expect_mentions(validation_error(c), {"dq has shape [2, 2, 64, 64]", "expected q's shape"});
}

TEST(AttentionBwdApiErrors, DkShapedLikeQueryUnderGqa) {
  // With GQA dK has K's H_KV heads, not Q's H.
  BwdCall c = valid_bwd_call();
  c.dk = TensorRef::contiguous(c.dk.data, DType::f16, {2, 4, 80, 64});
  expect_mentions(validation_error(c), {"dk has shape [2, 4, 80, 64]", "expected k's shape [2, 2, 80, 64]"});
}

TEST(AttentionBwdApiErrors, DvDtypeDiffers) {
  BwdCall c = valid_bwd_call();
  c.dv.dtype = DType::f32;
  expect_mentions(validation_error(c), {"dv has dtype f32 but q has f16"});
}

TEST(AttentionBwdApiErrors, DvRankNotFour) {
  BwdCall c = valid_bwd_call();
  c.dv.strides.pop_back();
  expect_mentions(validation_error(c), {"dv has 3 strides for its 4 dims"});
}

TEST(AttentionBwdApiErrors, GradientNullAddress) {
  BwdCall c = valid_bwd_call();
  c.dk.data = 0;
  expect_mentions(validation_error(c), {"dk has a null data address"});
}

TEST(AttentionBwdApiErrors, GradientElementsOverlapEachOther) {
  BwdCall c = valid_bwd_call();
  c.dv.strides[1] = 0; // both kv heads written to one place
  expect_mentions(validation_error(c), {"dv's elements overlap each other", "strides [10240, 0, 64, 1]"});
}

TEST(AttentionBwdApiErrors, GradientAliasesItsInput) {
  BwdCall c = valid_bwd_call();
  c.dq.data = c.q.data; // in place
  expect_mentions(validation_error(c), {"dq (bytes [0x10000000, 0x10010000)) overlaps q", "overwrite q"});
}

TEST(AttentionBwdApiErrors, GradientOverlapsOutputOfTheForward) {
  BwdCall c = valid_bwd_call();
  c.dk.data = c.o.data + 2 * 4 * 64 * 64 * 2 - 16; // dk starts on o's last row
  expect_mentions(validation_error(c), {"dk (bytes", "overlaps o", "overwrite o while it is read"});
}

TEST(AttentionBwdApiErrors, GradientOverlapsLse) {
  BwdCall c = valid_bwd_call();
  c.dv.data = c.lse.data + 256;
  expect_mentions(validation_error(c), {"dv (bytes", "overlaps lse"});
}

TEST(AttentionBwdApiErrors, GradientOverlapsDout) {
  BwdCall c = valid_bwd_call();
  c.dq.data = c.dout.data;
  expect_mentions(validation_error(c), {"dq (bytes", "overlaps dout", "overwrite dout"});
}

TEST(AttentionBwdApiErrors, GradientsOverlapEachOther) {
  BwdCall c = valid_bwd_call();
  c.dv.data = c.dk.data + 1024;
  expect_mentions(validation_error(c),
                  {"dv (bytes", "overlaps dk", "dv and dk would be written to the same memory"});
}

// dK and dV interleaved in one [B, N_K, 2, H_KV, D] buffer (a fused KV projection's gradient) overlap as
// byte ranges but share no element: accepted. The same views one head apart do share elements: rejected.
TEST(AttentionBwdApiErrors, InterleavedKeyValueGradientsAreDisjoint) {
  BwdCall c = valid_bwd_call();
  c.options.layout = "bshd";
  for (TensorRef* t : {&c.q, &c.o, &c.dout, &c.dq})
    *t = TensorRef::contiguous(t->data, DType::f16, {2, 64, 4, 64});
  c.k = TensorRef::contiguous(c.k.data, DType::f16, {2, 80, 2, 64});
  c.v = TensorRef::contiguous(c.v.data, DType::f16, {2, 80, 2, 64});
  const int64_t row = 2 * 64; // H_KV · D elements of one of dK, dV per key
  auto view = [&](uint64_t offset_elems) {
    return TensorRef{0x80000000 + offset_elems * 2, DType::f16, {2, 80, 2, 64}, {80 * 2 * row, 2 * row, 64, 1}};
  };
  c.dk = view(0);
  c.dv = view(row);
  EXPECT_NO_THROW(validate(c));
  c.dv = view(64); // dV's head 0 is dK's head 1
  expect_mentions(validation_error(c), {"dv (bytes", "overlaps dk", "the same memory"});
}

TEST(AttentionBwdApiErrors, GridTooTallForBatchTimesHeads) {
  BwdCall c;
  uint64_t at = 0x100000000;
  auto next = [&](DType t, llvm::ArrayRef<int64_t> shape) {
    TensorRef r = TensorRef::contiguous(at, t, shape);
    at += 0x100000000;
    return r;
  };
  for (TensorRef* t : {&c.q, &c.k, &c.v, &c.o, &c.dout, &c.dq, &c.dk, &c.dv})
    *t = next(DType::f16, {4096, 32, 8, 64});
  c.lse = next(DType::f32, {4096, 32, 8});
  expect_mentions(validation_error(c), {"B * H = 4096 * 32 = 131072 exceeds 65535", "grid"});
}

TEST(AttentionBwdApiErrors, ConfigDisagreesWithProblem) {
  BwdCall c = valid_bwd_call();
  Config config = default_bwd_configs(problem_of(c)).dkdv;
  config.set("HEAD_DIM", 32);
  c.options.config = config;
  expect_mentions(validation_error(c),
                  {"options.config (the dK/dV kernel's)", "HEAD_DIM=32", "needs HEAD_DIM=64"});
}

TEST(AttentionBwdApiErrors, ConfigWithoutTiles) {
  BwdCall c = valid_bwd_call();
  Config config = default_bwd_configs(problem_of(c)).dkdv;
  config.params.erase("BLOCK_N");
  c.options.config = config;
  expect_mentions(validation_error(c),
                  {"options.config", "has no BLOCK_N", "default_bwd_configs(problem).dkdv"});
}

TEST(AttentionBwdApiErrors, ConfigOfTheForward) {
  // A forward config passed by mistake: it has params of FA2 that the dK/dV kernel lacks.
  BwdCall c = valid_bwd_call();
  c.options.config = default_fa2_config(problem_of(c));
  expect_mentions(validation_error(c), {"options.config (the dK/dV kernel's)",
                                        "kernel 'fa2_bwd_dkdv' has no parameter", "its parameters are"});
}

TEST(AttentionBwdApiErrors, DqConfigDisagreesWithProblem) {
  BwdCall c = valid_bwd_call();
  Config config = default_bwd_configs(problem_of(c)).dq;
  config.set("CAUSAL", 1);
  c.options.dq_config = config;
  expect_mentions(validation_error(c), {"options.dq_config", "CAUSAL=1", "needs CAUSAL=0"});
}

TEST(AttentionBwdApiErrors, DqConfigWithAtomicParam) {
  BwdCall c = valid_bwd_call();
  Config config = default_bwd_configs(problem_of(c)).dq;
  config.set("ATOMIC_DQ", 1);
  c.options.dq_config = config;
  expect_mentions(validation_error(c),
                  {"options.dq_config", "kernel 'fa2_bwd_dq' has no parameter 'ATOMIC_DQ'"});
}

TEST(AttentionBwdApiErrors, DeterministicRejectsAtomicConfig) {
  BwdCall c = valid_bwd_call();
  c.options.config = default_bwd_configs(problem_of(c), /*atomic_dq=*/true).dkdv;
  expect_mentions(validation_error(c),
                  {"ATOMIC_DQ=1", "options.deterministic is true", "deterministic = false"});
}

TEST(AttentionBwdApiErrors, WarpSpecializedDkdvUnderGqa) {
  // The warp-specialised dK/dV kernel serves one query head a kv head; this call has H=4, H_KV=2.
  BwdCall c = valid_bwd_call();
  Config config = default_bwd_configs(problem_of(c)).dkdv;
  config.set("WARP_SPECIALIZE", 1);
  c.options.config = config;
  expect_mentions(validation_error(c),
                  {"options.config (the dK/dV kernel's)", "WARP_SPECIALIZE=1", "H == H_KV", "H=4 H_KV=2"});
}

TEST(AttentionBwdApiErrors, WarpSpecializedDkdvLaunchUnderGqa) {
  // Below the API (`kiln run`, a user's launch): the kernel's grid refuses the sizes it cannot serve.
  Config config = default_bwd_configs(problem_of(valid_bwd_call())).dkdv;
  config.set("WARP_SPECIALIZE", 1);
  const SizeArgs sizes = {{"B", 2}, {"H", 4}, {"H_KV", 2}, {"N_Q", 64}, {"N_K", 80}, {"D", 64}};
  expect_mentions(user_error([&] { (void)fa2_bwd_dkdv_def().grid(config, sizes); }),
                  {"fa2_bwd_dkdv (", "WARP_SPECIALIZE=1", "H == H_KV", "H=4 H_KV=2"});
  config.set("WARP_SPECIALIZE", 0);
  EXPECT_EQ(fa2_bwd_dkdv_def().grid(config, sizes)[1], 2 * 2); // B * H_KV programs along y
}

TEST(AttentionBwdApiErrors, AtomicConfigLeavesNoRoomForDqConfig) {
  BwdCall c = valid_bwd_call();
  c.options.deterministic = false;
  const AttentionBwdConfigs configs = default_bwd_configs(problem_of(c), /*atomic_dq=*/true);
  c.options.config = configs.dkdv;
  c.options.dq_config = configs.dq;
  expect_mentions(validation_error(c), {"options.dq_config", "ATOMIC_DQ=1", "never runs the dQ kernel"});
}

TEST(AttentionBwdApiErrors, NoQueriesChecksOnlyTheKeyGradients) {
  // N_Q == 0: q, o, lse, dout, dq have no elements (null addresses are fine); dk and dv are zeroed, so they
  // are still checked.
  BwdCall c = valid_bwd_call(/*n_q=*/0);
  for (TensorRef* t : {&c.q, &c.o, &c.lse, &c.dout, &c.dq})
    t->data = 0;
  EXPECT_NO_THROW(validate(c));
  c.dv.data = c.dk.data;
  expect_mentions(validation_error(c), {"dv (bytes", "overlaps dk"});
  c = valid_bwd_call(0);
  c.dk.data = 8;
  expect_mentions(validation_error(c), {"dk's address 0x8 is not 16-byte aligned"});
}

TEST(AttentionBwdApiErrors, EmptyBatchPasses) {
  BwdCall c = valid_bwd_call();
  for (TensorRef* t : {&c.q, &c.k, &c.v, &c.o, &c.lse, &c.dout, &c.dq, &c.dk, &c.dv}) {
    t->shape[0] = 0;
    t->data = 0;
  }
  EXPECT_NO_THROW(validate(c));
  // Nothing to do: backward() returns without looking for a GPU.
  EXPECT_NO_THROW(backward(c.q, c.k, c.v, c.o, c.lse, c.dout, c.dq, c.dk, c.dv, c.options));
}

TEST(AttentionBwdApiErrors, BackwardValidatesBeforeTouchingTheGpu) {
  BwdCall c = valid_bwd_call();
  c.dk.data = c.k.data;
  expect_mentions(
      user_error([&] { backward(c.q, c.k, c.v, c.o, c.lse, c.dout, c.dq, c.dk, c.dv, c.options); }),
      {"attention::backward: dk (bytes", "overlaps k"});
}

} // namespace
