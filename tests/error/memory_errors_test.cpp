// Error tests for loads and stores through tensors of pointers and through block pointers.
#include "dsl/dsl.h"
#include "error/error_test_support.h"

using namespace kiln;
using kiln_test::expect_call_site;
using kiln_test::expect_mentions;
using kiln_test::user_error;

namespace {

TEST(MemoryError, StoreValueDtypeDiffersFromPointee) {
  KernelBuilder kb("bad");
  Value out = kb.arg_ptr("out", f16);
  Value offs = arange(0, 64);
  Value v = zeros({64}, f32);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; store(out + offs, v); });
  expect_mentions(msg, {"store:", "tensor<64xf16>", "tensor<64xf32>", ".to(f16)"});
  expect_call_site(msg, line);
}

TEST(MemoryError, MaskedStoreValueDtypeDiffersFromPointee) {
  KernelBuilder kb("bad");
  Value out = kb.arg_ptr("out", bf16), n = kb.arg("n", i32);
  Value offs = arange(0, 64);
  Value v = zeros({64}, f32);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; store(out + offs, v, offs < n); });
  expect_mentions(msg, {"store:", "tensor<64xbf16>", "tensor<64xf32>", ".to(bf16)"});
  expect_call_site(msg, line);
}

TEST(MemoryError, StoreValueShapeDiffers) {
  KernelBuilder kb("bad");
  Value out = kb.arg_ptr("out", f32);
  Value offs = arange(0, 64);
  Value v = zeros({32}, f32);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; store(out + offs, v); });
  expect_mentions(msg, {"store:", "(64,)", "(32,)", "do not broadcast"});
  expect_call_site(msg, line);
}

TEST(MemoryError, StoreBlockValueShapeDiffers) {
  KernelBuilder kb("bad");
  Value out = kb.arg_ptr("out", f32);
  Value bp = make_block_ptr(out, {128, 128}, {128, 1}, {0, 0}, {32, 64}, {1, 0});
  Value v = zeros({64, 32}, f32);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; store(bp, v); });
  expect_mentions(msg, {"store_block:", "tensor<32x64xf32>", "tensor<64x32xf32>"});
  expect_call_site(msg, line);
}

TEST(MemoryError, AtomicAddBlockValueShapeDiffers) {
  KernelBuilder kb("bad");
  Value out = kb.arg_ptr("out", f32);
  Value bp = make_block_ptr(out, {128, 128}, {128, 1}, {0, 0}, {32, 64}, {1, 0});
  Value v = zeros({64, 32}, f32);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; atomic_add(bp, v, {0, 1}); });
  expect_mentions(msg, {"atomic_add_block:", "tensor<32x64xf32>", "tensor<64x32xf32>"});
  expect_call_site(msg, line);
}

TEST(MemoryError, AtomicAddBlockOfAnUnsupportedDtype) {
  KernelBuilder kb("bad");
  Value out = kb.arg_ptr("out", bf16);
  Value bp = make_block_ptr(out, {128, 128}, {128, 1}, {0, 0}, {32, 64}, {1, 0});
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; atomic_add(bp, zeros({32, 64}, bf16), {0}); });
  expect_mentions(msg, {"atomic_add_block:", "atomic_add supports f16, f32, f64, i32 and i64", "bf16"});
  expect_call_site(msg, line);
}

TEST(MemoryError, MaskedAtomicAddOnBlockPointer) {
  KernelBuilder kb("bad");
  Value x = kb.arg_ptr("x", f32), n = kb.arg("n", i32);
  Value bp = make_block_ptr(x, {n}, {1}, {0}, {64}, {0});
  Value mask = arange(0, 64) < n;
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; atomic_add(bp, zeros({64}, f32), mask); });
  expect_mentions(msg, {"atomic_add:", "a mask needs a tensor of pointers", "block_ptr<64xf32", "boundary_check"});
  expect_call_site(msg, line);
}

TEST(MemoryError, AtomicAddBoundaryCheckOnPointerTensor) {
  KernelBuilder kb("bad");
  Value x = kb.arg_ptr("x", f32);
  Value ptrs = x + arange(0, 64);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; atomic_add(ptrs, zeros({64}, f32), {0}); });
  expect_mentions(msg, {"atomic_add:", "boundary_check applies to block pointers", "tensor<64xptr<f32>>", "mask"});
  expect_call_site(msg, line);
}

TEST(MemoryError, AtomicAddBlockBoundaryCheckDimOutOfRange) {
  KernelBuilder kb("bad");
  Value x = kb.arg_ptr("x", f32);
  Value bp = make_block_ptr(x, {128, 128}, {128, 1}, {0, 0}, {32, 32}, {1, 0});
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; atomic_add(bp, zeros({32, 32}, f32), {2}); });
  expect_mentions(msg, {"atomic_add_block:", "boundary_check dim 2 is out of range", "rank-2", "0 to 1"});
  expect_call_site(msg, line);
}

TEST(MemoryError, LoadMaskShapeDiffers) {
  KernelBuilder kb("bad");
  Value x = kb.arg_ptr("x", f32), n = kb.arg("n", i32);
  Value offs = arange(0, 64);
  Value mask = arange(0, 32) < n;
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; load(x + offs, mask, 0.0f); });
  expect_mentions(msg, {"load:", "pointers' shape (64,)", "mask's shape (32,)"});
  expect_call_site(msg, line);
}

TEST(MemoryError, MaskNotBoolean) {
  KernelBuilder kb("bad");
  Value x = kb.arg_ptr("x", f32);
  Value offs = arange(0, 64);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; load(x + offs, offs, 0.0f); });
  expect_mentions(msg, {"load:", "mask must be tensor<64xi1>", "tensor<64xi32>"});
  expect_call_site(msg, line);
}

TEST(MemoryError, MaskedLoadOnBlockPointer) {
  KernelBuilder kb("bad");
  Value x = kb.arg_ptr("x", f32), n = kb.arg("n", i32);
  Value bp = make_block_ptr(x, {n}, {1}, {0}, {64}, {0});
  Value mask = arange(0, 64) < n;
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; load(bp, mask, 0.0f); });
  expect_mentions(msg, {"load:", "a mask needs a tensor of pointers", "block_ptr<64xf32", "boundary_check"});
  expect_call_site(msg, line);
}

TEST(MemoryError, BoundaryCheckOnPointerTensor) {
  KernelBuilder kb("bad");
  Value x = kb.arg_ptr("x", f32);
  Value ptrs = x + arange(0, 64);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; load(ptrs, {0}); });
  expect_mentions(msg, {"load:", "boundary_check applies to block pointers", "tensor<64xptr<f32>>", "mask"});
  expect_call_site(msg, line);
}

TEST(MemoryError, BlockShapeNotPowerOfTwo) {
  KernelBuilder kb("bad");
  Value x = kb.arg_ptr("x", f16);
  unsigned line = 0;
  std::string msg =
      user_error([&] { line = __LINE__; make_block_ptr(x, {128, 128}, {128, 1}, {0, 0}, {48, 64}, {1, 0}); });
  expect_mentions(msg, {"make_block_ptr:", "block_shape (48, 64)", "power of two"});
  expect_call_site(msg, line);
}

TEST(MemoryError, OrderNotAPermutation) {
  KernelBuilder kb("bad");
  Value x = kb.arg_ptr("x", f16);
  unsigned line = 0;
  std::string msg =
      user_error([&] { line = __LINE__; make_block_ptr(x, {128, 128}, {128, 1}, {0, 0}, {32, 32}, {1, 1}); });
  expect_mentions(msg, {"make_block_ptr:", "order (1, 1)", "permutation"});
  expect_call_site(msg, line);
}

TEST(MemoryError, OrderOfWrongRank) {
  KernelBuilder kb("bad");
  Value x = kb.arg_ptr("x", f16);
  unsigned line = 0;
  std::string msg =
      user_error([&] { line = __LINE__; make_block_ptr(x, {128, 128}, {128, 1}, {0, 0}, {32, 32}, {0}); });
  expect_mentions(msg, {"make_block_ptr:", "one entry per block dim (2", "2, 2, 2 and 1"});
  expect_call_site(msg, line);
}

TEST(MemoryError, BlockPointerEntryCountsDiffer) {
  KernelBuilder kb("bad");
  Value x = kb.arg_ptr("x", f16);
  unsigned line = 0;
  std::string msg =
      user_error([&] { line = __LINE__; make_block_ptr(x, {128, 128}, {1}, {0, 0}, {32, 32}, {1, 0}); });
  expect_mentions(msg, {"make_block_ptr:", "shape, strides, offsets and order", "2, 1, 2 and 2"});
  expect_call_site(msg, line);
}

TEST(MemoryError, BlockPointerFloatStride) {
  KernelBuilder kb("bad");
  Value x = kb.arg_ptr("x", f16);
  Value s = kb.arg("s", f32);
  unsigned line = 0;
  std::string msg =
      user_error([&] { line = __LINE__; make_block_ptr(x, {128, 128}, {s, 1}, {0, 0}, {32, 32}, {1, 0}); });
  expect_mentions(msg, {"make_block_ptr: strides", "integer scalars", "f32"});
  expect_call_site(msg, line);
}

TEST(MemoryError, BoundaryCheckDimOutOfRange) {
  KernelBuilder kb("bad");
  Value x = kb.arg_ptr("x", f16);
  Value bp = make_block_ptr(x, {128, 128}, {128, 1}, {0, 0}, {32, 32}, {1, 0});
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; load(bp, {0, 2}); });
  expect_mentions(msg, {"load_block:", "boundary_check dim 2 is out of range", "rank-2", "0 to 1"});
  expect_call_site(msg, line);
}

TEST(MemoryError, NanPaddingOnIntegerBlock) {
  KernelBuilder kb("bad");
  Value x = kb.arg_ptr("x", i32);
  Value bp = make_block_ptr(x, {128}, {1}, {0}, {32}, {0});
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; load(bp, {0}, Padding::NaN); });
  expect_mentions(msg, {"load_block:", "padding NaN", "floating-point", "i32"});
  expect_call_site(msg, line);
}

TEST(MemoryError, AdvanceWithWrongOffsetCount) {
  KernelBuilder kb("bad");
  Value x = kb.arg_ptr("x", f16);
  Value bp = make_block_ptr(x, {128, 128}, {128, 1}, {0, 0}, {32, 32}, {1, 0});
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; advance(bp, {32}); });
  expect_mentions(msg, {"advance:", "expected 2 offsets", "rank-2", "got 1"});
  expect_call_site(msg, line);
}

TEST(MemoryError, PointerToBoolean) {
  KernelBuilder kb("bad");
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; kb.arg_ptr("flags", i1); });
  expect_mentions(msg, {"'flags'", "pointers to i1", "u8"});
  expect_call_site(msg, line);
}

} // namespace
