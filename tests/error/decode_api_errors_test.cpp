// Error tests of the split-KV decoding host API (kernels/attention/decode_api.h): each test breaks one thing
// in an otherwise valid decode call and asserts that validate_decode_args (no GPU needed: addresses are never
// dereferenced) raises a kiln::Error naming what was expected and what came, at the caller's line.
#include "error/error_test_support.h"
#include "kernels/attention/decode_api.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace kiln;
using namespace kiln::attention;
using kiln_test::expect_call_site;
using kiln_test::expect_mentions;
using kiln_test::user_error;

namespace {

struct Call {
  TensorRef q, k, v, o;
  std::optional<TensorRef> lse;
  DecodeOptions options;
};

// B=2, N_Q=4, H=8, H_KV=2, D=64, f16; a paged cache of 10 pages of 16 keys, 3 pages a sequence, per-sequence
// key counts, bottom-right causal. Fake device addresses far apart.
Call valid_call() {
  Call c;
  c.q = TensorRef::contiguous(0x10000000, DType::f16, {2, 4, 8, 64});
  c.k = TensorRef::contiguous(0x20000000, DType::f16, {10, 16, 2, 64});
  c.v = TensorRef::contiguous(0x30000000, DType::f16, {10, 16, 2, 64});
  c.o = TensorRef::contiguous(0x40000000, DType::f16, {2, 4, 8, 64});
  c.lse = TensorRef::contiguous(0x50000000, DType::f32, {2, 8, 4});
  c.options.block_table = TensorRef::contiguous(0x60000000, DType::i32, {2, 3});
  c.options.seqlens_k = TensorRef::contiguous(0x70000000, DType::i32, {2});
  c.options.causal = Causal::BottomRight;
  return c;
}

std::string validation_error(const Call& c) {
  return user_error([&] { validate_decode_args(c.q, c.k, c.v, c.o, c.lse, c.options); });
}

TEST(DecodeApiErrors, ValidCallsPass) {
  Call c = valid_call();
  ValidatedDecode a = validate_decode_args(c.q, c.k, c.v, c.o, c.lse, c.options);
  EXPECT_EQ(a.problem.page_size, 16);
  EXPECT_EQ(a.problem.N_K, 48) << "capacity: 3 pages of 16";
  EXPECT_EQ(a.problem.group(), 4);
  EXPECT_TRUE(a.problem.has_seqlens());
  c.options.block_table.reset(); // contiguous [B, N_K, H_KV, D]
  c.k = TensorRef::contiguous(0x20000000, DType::f16, {2, 100, 2, 64});
  c.v = TensorRef::contiguous(0x30000000, DType::f16, {2, 100, 2, 64});
  c.lse.reset();
  a = validate_decode_args(c.q, c.k, c.v, c.o, c.lse, c.options);
  EXPECT_EQ(a.problem.N_K, 100);
  EXPECT_FALSE(a.problem.paged());
}

TEST(DecodeApiErrors, MessageCarriesCallersLine) {
  Call c = valid_call();
  c.q.shape.pop_back();
  c.q.strides.pop_back();
  const unsigned line = __LINE__ + 1;
  std::string msg = user_error([&] { validate_decode_args(c.q, c.k, c.v, c.o, c.lse, c.options); });
  expect_call_site(msg, line);
  expect_mentions(msg, {"attention::decode", "q must have rank 4 [B, N_Q, H, D]", "got rank 3"});
}

TEST(DecodeApiErrors, CacheRankNamesThePagedLayout) {
  Call c = valid_call();
  c.k = TensorRef::contiguous(c.k.data, DType::f16, {10, 16, 128});
  expect_mentions(validation_error(c),
                  {"k_cache must have rank 4 [num_pages, page_size, H_KV, D]", "got rank 3"});
}

TEST(DecodeApiErrors, DtypesDiffer) {
  Call c = valid_call();
  c.v.dtype = DType::bf16;
  expect_mentions(validation_error(c), {"v_cache has dtype bf16 but q has f16", "must share one dtype"});
  c = valid_call();
  c.q.dtype = c.k.dtype = c.v.dtype = c.o.dtype = DType::i32;
  expect_mentions(validation_error(c), {"q has dtype i32", "expected f16, bf16 or f32"});
}

TEST(DecodeApiErrors, CachesOfDifferentShapes) {
  Call c = valid_call();
  c.v = TensorRef::contiguous(c.v.data, DType::f16, {12, 16, 2, 64});
  expect_mentions(validation_error(c), {"v_cache has shape [12, 16, 2, 64] but k_cache has [10, 16, 2, 64]"});
}

TEST(DecodeApiErrors, HeadDimsDiffer) {
  Call c = valid_call();
  c.k = TensorRef::contiguous(c.k.data, DType::f16, {10, 16, 2, 32});
  c.v = TensorRef::contiguous(c.v.data, DType::f16, {10, 16, 2, 32});
  expect_mentions(validation_error(c), {"k_cache has head dim 32 but q has 64"});
}

TEST(DecodeApiErrors, HeadsNotAMultiple) {
  Call c = valid_call();
  c.k = TensorRef::contiguous(c.k.data, DType::f16, {10, 16, 3, 64});
  c.v = TensorRef::contiguous(c.v.data, DType::f16, {10, 16, 3, 64});
  expect_mentions(validation_error(c), {"H=8 heads, not a multiple of the cache's H_KV=3"});
}

TEST(DecodeApiErrors, HeadDimUnsupported) {
  Call c = valid_call();
  for (TensorRef* t : {&c.q, &c.o})
    *t = TensorRef::contiguous(t->data, DType::f16, {2, 4, 8, 60});
  for (TensorRef* t : {&c.k, &c.v})
    *t = TensorRef::contiguous(t->data, DType::f16, {10, 16, 2, 60});
  expect_mentions(validation_error(c), {"head dim D=60 is not supported", "multiple of 8"});
}

TEST(DecodeApiErrors, NoQueries) {
  Call c = valid_call();
  for (TensorRef* t : {&c.q, &c.o})
    *t = TensorRef::contiguous(t->data, DType::f16, {2, 0, 8, 64});
  c.lse = TensorRef::contiguous(0x50000000, DType::f32, {2, 8, 0});
  expect_mentions(validation_error(c), {"N_Q (queries) is 0", "at least 1"});
}

TEST(DecodeApiErrors, OutputShapeDiffers) {
  Call c = valid_call();
  c.o = TensorRef::contiguous(c.o.data, DType::f16, {2, 4, 4, 64});
  expect_mentions(validation_error(c), {"o has shape [2, 4, 4, 64]", "expected q's shape [2, 4, 8, 64]"});
}

TEST(DecodeApiErrors, LseShapeAndDtype) {
  Call c = valid_call();
  c.lse = TensorRef::contiguous(0x50000000, DType::f32, {2, 4, 8});
  expect_mentions(validation_error(c), {"lse has shape [2, 4, 8]", "expected [B, H, N_Q] = [2, 8, 4]"});
  c = valid_call();
  c.lse->dtype = DType::f16;
  expect_mentions(validation_error(c), {"lse has dtype f16; expected f32"});
  c = valid_call();
  c.lse->strides = {1, 2, 16};
  expect_mentions(validation_error(c), {"lse has strides [1, 2, 16]", "contiguous strides [32, 4, 1]"});
}

TEST(DecodeApiErrors, PageSizeNotAPowerOfTwo) {
  Call c = valid_call();
  c.k = TensorRef::contiguous(c.k.data, DType::f16, {10, 24, 2, 64});
  c.v = TensorRef::contiguous(c.v.data, DType::f16, {10, 24, 2, 64});
  expect_mentions(validation_error(c), {"pages of 24 keys", "power of two >= 16"});
  c.k = TensorRef::contiguous(c.k.data, DType::f16, {10, 8, 2, 64});
  c.v = TensorRef::contiguous(c.v.data, DType::f16, {10, 8, 2, 64});
  expect_mentions(validation_error(c), {"pages of 8 keys"});
}

TEST(DecodeApiErrors, BlockTableWrong) {
  Call c = valid_call();
  c.options.block_table->dtype = DType::i64;
  expect_mentions(validation_error(c), {"options.block_table has dtype i64; expected i32"});
  c = valid_call();
  c.options.block_table = TensorRef::contiguous(0x60000000, DType::i32, {3, 3});
  expect_mentions(validation_error(c), {"options.block_table has shape [3, 3]", "[B, max_pages]", "B = 2"});
  c = valid_call();
  c.options.block_table = TensorRef::contiguous(0x60000000, DType::i32, {2, 0});
  expect_mentions(validation_error(c), {"no page a sequence"});
  c = valid_call();
  c.options.block_table->strides = {1, 2};
  expect_mentions(validation_error(c), {"options.block_table has strides [1, 2]", "last dim contiguous"});
  c = valid_call();
  c.options.block_table->data = 0x60000002;
  expect_mentions(validation_error(c), {"options.block_table's address 0x60000002 is not 4-byte aligned"});
}

TEST(DecodeApiErrors, ContiguousCacheBatchDiffers) {
  Call c = valid_call();
  c.options.block_table.reset();
  c.k = TensorRef::contiguous(c.k.data, DType::f16, {3, 100, 2, 64});
  c.v = TensorRef::contiguous(c.v.data, DType::f16, {3, 100, 2, 64});
  expect_mentions(validation_error(c),
                  {"k_cache has batch 3 but q has 2", "options.block_table for a paged cache"});
}

TEST(DecodeApiErrors, EmptyCache) {
  Call c = valid_call();
  c.options.block_table.reset();
  c.k = TensorRef::contiguous(c.k.data, DType::f16, {2, 0, 2, 64});
  c.v = TensorRef::contiguous(c.v.data, DType::f16, {2, 0, 2, 64});
  expect_mentions(validation_error(c), {"the cache holds no key"});
}

TEST(DecodeApiErrors, SeqlensWrong) {
  Call c = valid_call();
  c.options.seqlens_k = TensorRef::contiguous(0x70000000, DType::i32, {3});
  expect_mentions(validation_error(c), {"options.seqlens_k has shape [3]", "B = 2"});
  c = valid_call();
  c.options.seqlens_k->dtype = DType::i64;
  expect_mentions(validation_error(c), {"options.seqlens_k has dtype i64; expected i32"});
  c = valid_call();
  c.options.seqlens_k->data = 0;
  expect_mentions(validation_error(c), {"options.seqlens_k has a null data address"});
}

TEST(DecodeApiErrors, TopLeftCausalRefused) {
  Call c = valid_call();
  c.options.causal = Causal::TopLeft;
  expect_mentions(validation_error(c), {"options.causal is TopLeft", "BottomRight"});
}

TEST(DecodeApiErrors, ScaleNotFinite) {
  Call c = valid_call();
  c.options.sm_scale = std::numeric_limits<double>::quiet_NaN();
  expect_mentions(validation_error(c), {"options.sm_scale=nan", "finite"});
}

TEST(DecodeApiErrors, SplitsOutOfRange) {
  Call c = valid_call();
  c.options.num_splits = -1;
  expect_mentions(validation_error(c), {"options.num_splits=-1 is outside [0, 1024]"});
  c.options.num_splits = 5000;
  expect_mentions(validation_error(c), {"options.num_splits=5000"});
}

TEST(DecodeApiErrors, HeadDimNotContiguous) {
  Call c = valid_call();
  c.q.strides = {4096, 1024, 128, 2};
  expect_mentions(validation_error(c), {"q's head dim is not contiguous: stride 2"});
}

TEST(DecodeApiErrors, MisalignedAddress) {
  Call c = valid_call();
  c.k.data += 8;
  expect_mentions(validation_error(c), {"k_cache's address", "not 16-byte aligned"});
}

TEST(DecodeApiErrors, OutputOverlapsInput) {
  Call c = valid_call();
  c.o.data = c.q.data;
  expect_mentions(validation_error(c), {"o (bytes", "overlaps q", "would overwrite q while it is read"});
  c = valid_call();
  c.lse->data = c.o.data;
  expect_mentions(validation_error(c), {"lse (bytes", "overlaps o", "written to the same memory"});
  c = valid_call();
  c.o.data = c.options.block_table->data;
  expect_mentions(validation_error(c), {"overlaps block_table"});
}

TEST(DecodeApiErrors, OutputElementsOverlap) {
  Call c = valid_call();
  c.o.strides = {0, 512, 64, 1};
  expect_mentions(validation_error(c), {"o's elements overlap each other"});
}

TEST(DecodeApiErrors, WorkspaceWrong) {
  Call c = valid_call();
  c.options.num_splits = 4;
  c.options.workspace = TensorRef::contiguous(0x80000000, DType::f32, {100});
  expect_mentions(validation_error(c), {"options.workspace holds 100 f32", "4 splits need",
                                        std::to_string(decode_workspace_bytes(2, 8, 4, 64, 4)) + " bytes"});
  c.options.workspace = TensorRef::contiguous(0x80000000, DType::f16, {1 << 20});
  expect_mentions(validation_error(c), {"options.workspace has dtype f16; expected f32"});
  c.options.workspace = TensorRef::contiguous(0x80000000, DType::f32, {1 << 20});
  c.options.workspace->data = c.o.data;
  expect_mentions(validation_error(c), {"workspace (bytes", "overlaps o"});
  c.options.workspace->data = 0x80000000;
  EXPECT_NO_THROW(validate_decode_args(c.q, c.k, c.v, c.o, c.lse, c.options));
}

TEST(DecodeApiErrors, SplitConfigDisagrees) {
  Call c = valid_call();
  ValidatedDecode a = validate_decode_args(c.q, c.k, c.v, c.o, c.lse, c.options);
  Config config = default_decode_split_config(a.problem);
  config.set("BLOCK_N", 32);
  c.options.split_config = config;
  expect_mentions(validation_error(c), {"options.split_config", "BLOCK_N=32, wider than a page of 16 keys"});
  config.set("BLOCK_N", 16).set("HEAD_DIM", 128);
  c.options.split_config = config;
  expect_mentions(validation_error(c), {"options.split_config", "HEAD_DIM=128", "needs HEAD_DIM=64"});
}

TEST(DecodeApiErrors, EmptyBatchIsANoOp) {
  Call c = valid_call();
  for (TensorRef* t : {&c.q, &c.o})
    *t = TensorRef::contiguous(0, DType::f16, {0, 4, 8, 64});
  c.lse = TensorRef::contiguous(0, DType::f32, {0, 8, 4});
  c.options.block_table = TensorRef::contiguous(0x60000000, DType::i32, {0, 3});
  c.options.seqlens_k = TensorRef::contiguous(0x70000000, DType::i32, {0});
  EXPECT_TRUE(validate_decode_args(c.q, c.k, c.v, c.o, c.lse, c.options).empty);
}

} // namespace
