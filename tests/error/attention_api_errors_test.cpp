// Error tests of the attention host API: each test breaks one thing in an otherwise valid forward call and
// asserts that validate_attention_args (no GPU needed: the addresses are never dereferenced) or forward
// raises a kiln::Error that names what was expected and what came.
#include "error/error_test_support.h"
#include "kernels/attention/attention_api.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace kiln;
using namespace kiln::attention;
using kiln_test::expect_call_site;
using kiln_test::expect_mentions;
using kiln_test::user_error;

namespace {

// A forward call's arguments: tensors at distinct, 16-byte aligned fake device addresses far apart.
struct Call {
  TensorRef q, k, v, o;
  std::optional<TensorRef> lse;
  AttentionOptions options;
};

// B=2, H=4, H_KV=2, N_Q=64, N_K=80, D=64, f16, bhsd, contiguous.
Call valid_call(DType dtype = DType::f16) {
  Call c;
  c.q = TensorRef::contiguous(0x10000000, dtype, {2, 4, 64, 64});
  c.k = TensorRef::contiguous(0x20000000, dtype, {2, 2, 80, 64});
  c.v = TensorRef::contiguous(0x30000000, dtype, {2, 2, 80, 64});
  c.o = TensorRef::contiguous(0x40000000, dtype, {2, 4, 64, 64});
  c.lse = TensorRef::contiguous(0x50000000, DType::f32, {2, 4, 64});
  return c;
}

std::string validation_error(const Call& c) {
  return user_error([&] { validate_attention_args(c.q, c.k, c.v, c.o, c.lse, c.options); });
}

TEST(AttentionApiErrors, ValidCallPasses) {
  Call c = valid_call();
  EXPECT_NO_THROW(validate_attention_args(c.q, c.k, c.v, c.o, c.lse, c.options));
}

TEST(AttentionApiErrors, MessageCarriesCallersLine) {
  Call c = valid_call();
  c.q.shape.pop_back();
  c.q.strides.pop_back();
  const unsigned line = __LINE__ + 1;
  std::string msg = user_error([&] { validate_attention_args(c.q, c.k, c.v, c.o, c.lse, c.options); });
  expect_call_site(msg, line);
  expect_mentions(msg, {"attention::forward"});
}

TEST(AttentionApiErrors, RankNotFour) {
  Call c = valid_call();
  c.k = TensorRef::contiguous(c.k.data, DType::f16, {2, 2, 80, 64, 1});
  expect_mentions(validation_error(c),
                  {"k must have rank 4 [B, H, N, D]", "got rank 5", "[2, 2, 80, 64, 1]"});
}

TEST(AttentionApiErrors, StridesCountDiffersFromRank) {
  Call c = valid_call();
  c.v.strides.pop_back();
  expect_mentions(validation_error(c), {"v has 3 strides for its 4 dims", "one stride per dim"});
}

TEST(AttentionApiErrors, LseRankNotThree) {
  Call c = valid_call();
  c.lse = TensorRef::contiguous(0x50000000, DType::f32, {2, 4, 64, 1});
  expect_mentions(validation_error(c), {"lse must have rank 3 [B, H, N_Q]", "got rank 4"});
}

TEST(AttentionApiErrors, UnknownLayout) {
  Call c = valid_call();
  c.options.layout = "bsdh";
  expect_mentions(validation_error(c), {"\"bsdh\"", "expected \"bhsd\"", "\"bshd\""});
}

TEST(AttentionApiErrors, DtypesDiffer) {
  Call c = valid_call();
  c.v.dtype = DType::bf16;
  expect_mentions(validation_error(c), {"v has dtype bf16 but q has f16", "must share one dtype"});
}

TEST(AttentionApiErrors, OutputDtypeDiffers) {
  Call c = valid_call();
  c.o.dtype = DType::f32;
  expect_mentions(validation_error(c), {"o has dtype f32 but q has f16"});
}

TEST(AttentionApiErrors, UnsupportedDtype) {
  Call c = valid_call(DType::f64);
  expect_mentions(validation_error(c), {"q has dtype f64", "expected f16, bf16 or f32"});
}

TEST(AttentionApiErrors, LseNotF32) {
  Call c = valid_call();
  c.lse->dtype = DType::f16;
  expect_mentions(validation_error(c), {"lse has dtype f16", "expected f32"});
}

TEST(AttentionApiErrors, Tf32WithoutF32) {
  Call c = valid_call(DType::bf16);
  c.options.tf32 = true;
  expect_mentions(validation_error(c), {"tf32 applies to f32 inputs", "bf16"});
}

TEST(AttentionApiErrors, HeadDimsDiffer) {
  Call c = valid_call();
  c.k = TensorRef::contiguous(c.k.data, DType::f16, {2, 2, 80, 32});
  expect_mentions(validation_error(c), {"k has head dim 32 but q has 64", "expected equal head dims"});
}

TEST(AttentionApiErrors, ValueHeadDimDiffers) {
  Call c = valid_call();
  c.v = TensorRef::contiguous(c.v.data, DType::f16, {2, 2, 80, 128});
  expect_mentions(validation_error(c), {"v has head dim 128 but q has 64"});
}

TEST(AttentionApiErrors, BatchDiffers) {
  Call c = valid_call();
  c.v = TensorRef::contiguous(c.v.data, DType::f16, {3, 2, 80, 64});
  expect_mentions(validation_error(c), {"v has batch 3 but q has 2", "expected equal batch sizes"});
}

TEST(AttentionApiErrors, KeyAndValueLengthsDiffer) {
  Call c = valid_call();
  c.v = TensorRef::contiguous(c.v.data, DType::f16, {2, 2, 81, 64});
  expect_mentions(validation_error(c),
                  {"v has 81 keys but k has 80", "expected equal K and V sequence lengths"});
}

TEST(AttentionApiErrors, KeyAndValueHeadsDiffer) {
  Call c = valid_call();
  c.v = TensorRef::contiguous(c.v.data, DType::f16, {2, 1, 80, 64});
  expect_mentions(validation_error(c), {"v has 1 heads but k has 2", "expected equal K and V head counts"});
}

TEST(AttentionApiErrors, HeadsNotMultipleOfKvHeads) {
  Call c = valid_call();
  c.k = TensorRef::contiguous(c.k.data, DType::f16, {2, 3, 80, 64});
  c.v = TensorRef::contiguous(c.v.data, DType::f16, {2, 3, 80, 64});
  expect_mentions(validation_error(c), {"H=4", "not a multiple of", "H_KV=3"});
}

TEST(AttentionApiErrors, BshdLayoutReadsHeadsFromDimTwo) {
  // Valid bhsd shapes read as bshd: k's "heads" are 80, q's are 64.
  Call c = valid_call();
  c.options.layout = "bshd";
  c.lse = std::nullopt;
  expect_mentions(validation_error(c), {"H=64", "H_KV=80"});
}

TEST(AttentionApiErrors, OutputShapeDiffers) {
  Call c = valid_call();
  c.o = TensorRef::contiguous(c.o.data, DType::f16, {2, 4, 63, 64});
  expect_mentions(validation_error(c), {"o has shape [2, 4, 63, 64]", "expected q's shape [2, 4, 64, 64]"});
}

TEST(AttentionApiErrors, LseShapeWrong) {
  Call c = valid_call();
  c.lse = TensorRef::contiguous(0x50000000, DType::f32, {2, 64, 4});
  expect_mentions(validation_error(c), {"lse has shape [2, 64, 4]", "expected [B, H, N_Q] = [2, 4, 64]"});
}

TEST(AttentionApiErrors, LseNotContiguous) {
  Call c = valid_call();
  c.lse->strides = {4 * 128, 128, 1}; // rows padded to 128
  expect_mentions(validation_error(c),
                  {"lse has strides [512, 128, 1]", "expected the contiguous strides [256, 64, 1]"});
}

TEST(AttentionApiErrors, HeadDimNotContiguous) {
  Call c = valid_call();
  c.k.strides = {2 * 80 * 128, 80 * 128, 128, 2}; // every other element of a wider buffer
  expect_mentions(validation_error(c),
                  {"k's head dim is not contiguous: stride 2", "expected stride 1 in the last dim"});
}

TEST(AttentionApiErrors, HeadDimTooLarge) {
  Call c = valid_call();
  for (TensorRef* t : {&c.q, &c.k, &c.v, &c.o})
    *t = TensorRef::contiguous(t->data, DType::f16, {t->shape[0], t->shape[1], t->shape[2], 264});
  expect_mentions(validation_error(c), {"head dim D=264 is not supported", "multiple of 8 in [8, 256]"});
}

TEST(AttentionApiErrors, HeadDimNotMultipleOfEight) {
  Call c = valid_call();
  for (TensorRef* t : {&c.q, &c.k, &c.v, &c.o})
    *t = TensorRef::contiguous(t->data, DType::f16, {t->shape[0], t->shape[1], t->shape[2], 60});
  expect_mentions(validation_error(c), {"head dim D=60 is not supported", "a multiple of 8"});
}

TEST(AttentionApiErrors, HeadDimZero) {
  Call c = valid_call();
  for (TensorRef* t : {&c.q, &c.k, &c.v, &c.o})
    *t = TensorRef::contiguous(t->data, DType::f16, {t->shape[0], t->shape[1], t->shape[2], 0});
  expect_mentions(validation_error(c), {"head dim D=0 is not supported"});
}

TEST(AttentionApiErrors, NoKeys) {
  Call c = valid_call();
  c.k = TensorRef::contiguous(c.k.data, DType::f16, {2, 2, 0, 64});
  c.v = TensorRef::contiguous(c.v.data, DType::f16, {2, 2, 0, 64});
  expect_mentions(validation_error(c), {"N_K (keys) is 0", "softmax over no keys is undefined"});
}

TEST(AttentionApiErrors, NoHeads) {
  Call c = valid_call();
  c.q = TensorRef::contiguous(c.q.data, DType::f16, {2, 0, 64, 64});
  c.o = TensorRef::contiguous(c.o.data, DType::f16, {2, 0, 64, 64});
  c.lse = TensorRef::contiguous(0x50000000, DType::f32, {2, 0, 64});
  expect_mentions(validation_error(c), {"H (q heads) is 0", "expected at least 1"});
}

TEST(AttentionApiErrors, NegativeSize) {
  Call c = valid_call();
  c.q.shape[2] = -64;
  expect_mentions(validation_error(c), {"q has a negative size -64 in dim 2"});
}

TEST(AttentionApiErrors, NegativeStride) {
  Call c = valid_call();
  c.v.strides[2] = -64; // reversed sequence
  expect_mentions(validation_error(c), {"v has a negative stride -64 in dim 2", "expected strides >= 0"});
}

TEST(AttentionApiErrors, NullAddress) {
  Call c = valid_call();
  c.v.data = 0;
  expect_mentions(validation_error(c), {"v has a null data address", "expected a device address"});
}

TEST(AttentionApiErrors, MisalignedAddress) {
  Call c = valid_call();
  c.k.data += 8;
  expect_mentions(validation_error(c), {"k's address 0x20000008 is not 16-byte aligned", "8 bytes past"});
}

TEST(AttentionApiErrors, MisalignedLseAddress) {
  Call c = valid_call();
  c.lse->data += 4;
  expect_mentions(validation_error(c), {"lse's address 0x50000004 is not 16-byte aligned"});
}

TEST(AttentionApiErrors, MisalignedRowStride) {
  Call c = valid_call();
  c.q.strides = {4 * 64 * 68, 64 * 68, 68, 1}; // rows of 68 f16 = 136 bytes
  expect_mentions(validation_error(c),
                  {"q's stride 68 in dim 2 is 136 bytes, not a multiple of 16", "a multiple of 8 elements"});
}

TEST(AttentionApiErrors, SequenceTooLongForI32) {
  Call c = valid_call();
  const int64_t n = int64_t{1} << 31;
  c.k = TensorRef::contiguous(c.k.data, DType::f16, {1, 2, n, 64});
  c.v = TensorRef::contiguous(c.v.data, DType::f16, {1, 2, n, 64});
  c.q = TensorRef::contiguous(c.q.data, DType::f16, {1, 4, 64, 64});
  c.o = TensorRef::contiguous(c.o.data, DType::f16, {1, 4, 64, 64});
  c.lse = std::nullopt;
  expect_mentions(validation_error(c), {"N_K=2147483648 is too large", "i32", "below 2^31 - 2^16"});
}

TEST(AttentionApiErrors, ExtentOverflowsSixtyFourBits) {
  Call c = valid_call();
  c.q.strides[0] = int64_t{1} << 62; // batch 1 starts 2^63 bytes in
  expect_mentions(validation_error(c), {"q (f16 [2, 4, 64, 64]", "overflow"});
}

TEST(AttentionApiErrors, OutputElementsOverlapEachOther) {
  Call c = valid_call();
  c.o.strides[1] = 0; // every head written to one place
  expect_mentions(validation_error(c), {"o's elements overlap each other", "strides [16384, 0, 64, 1]"});
}

TEST(AttentionApiErrors, OutputAliasesQuery) {
  Call c = valid_call();
  c.o.data = c.q.data; // in place
  expect_mentions(validation_error(c), {"o (bytes [0x10000000, 0x10010000)) overlaps q", "overwrite q"});
}

TEST(AttentionApiErrors, OutputOverlapsValuePartially) {
  Call c = valid_call();
  c.o.data = c.v.data + 2 * 2 * 80 * 64 * 2 - 16; // o starts on v's last row
  expect_mentions(validation_error(c), {"o (bytes", "overlaps v", "overwrite v"});
}

TEST(AttentionApiErrors, LseOverlapsOutput) {
  Call c = valid_call();
  c.lse->data = c.o.data + 1024;
  expect_mentions(validation_error(c), {"lse (bytes", "overlaps o", "written to the same memory"});
}

TEST(AttentionApiErrors, ScaleNotFinite) {
  Call c = valid_call();
  c.options.sm_scale = std::numeric_limits<double>::quiet_NaN();
  expect_mentions(validation_error(c), {"options.sm_scale=nan", "expected a finite scale"});
  c.options.sm_scale = 1e300;
  expect_mentions(validation_error(c), {"options.sm_scale=1e+300", "not a finite f32 value"});
}

TEST(AttentionApiErrors, ConfigDisagreesWithProblem) {
  Call c = valid_call();
  AttentionProblem p = validate_attention_args(c.q, c.k, c.v, c.o, c.lse).problem;
  Config config = default_fa2_config(p);
  config.set("HEAD_DIM", 32);
  c.options.config = config;
  expect_mentions(validation_error(c), {"options.config", "HEAD_DIM=32", "needs HEAD_DIM=64"});
}

TEST(AttentionApiErrors, ConfigWithoutTiles) {
  Call c = valid_call();
  c.options.config = Config{};
  expect_mentions(validation_error(c), {"options.config", "has no BLOCK_M", "default_fa2_config"});
}

TEST(AttentionApiErrors, Fa2GridTooTallForBatchTimesHeads) {
  // forward() checks FA2's grid before it looks for a GPU; nothing is dereferenced.
  Call c = valid_call();
  c.q = TensorRef::contiguous(0x10000000, DType::f16, {4096, 32, 8, 64});
  c.o = TensorRef::contiguous(0x100000000, DType::f16, {4096, 32, 8, 64});
  c.k = TensorRef::contiguous(0x200000000, DType::f16, {4096, 32, 8, 64});
  c.v = TensorRef::contiguous(0x300000000, DType::f16, {4096, 32, 8, 64});
  c.lse = std::nullopt;
  std::string msg = user_error([&] { forward(c.q, c.k, c.v, c.o, c.lse, c.options); });
  expect_mentions(msg, {"B * H = 4096 * 32 = 131072 exceeds 65535", "grid"});
}

TEST(AttentionApiErrors, ForwardValidatesBeforeTouchingTheGpu) {
  // The same mistake through forward() and fa1_forward(): reported as a kiln::Error whether or not a GPU
  // exists.
  Call c = valid_call();
  c.o.data = c.k.data;
  expect_mentions(user_error([&] { forward(c.q, c.k, c.v, c.o, c.lse, c.options); }),
                  {"o (bytes", "overlaps k"});
  expect_mentions(user_error([&] { fa1_forward(c.q, c.k, c.v, c.o, c.lse, c.options); }),
                  {"o (bytes", "overlaps k"});
}

} // namespace
