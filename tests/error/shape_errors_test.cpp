// Error tests for tile shapes: sources (arange, zeros, program_id), reductions, trans, reshape, and the largest
// tile (dsl/tile_limits.h: 2^20 elements, whatever op makes it).
#include "dsl/dsl.h"
#include "error/error_test_support.h"

using namespace kiln;
using kiln_test::expect_call_site;
using kiln_test::expect_mentions;
using kiln_test::user_error;

namespace {

TEST(ShapeError, ArangeNotPowerOfTwo) {
  KernelBuilder kb("bad");
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; arange(0, 48); });
  expect_mentions(msg, {"arange:", "[0, 48)", "48 elements", "power of two"});
  expect_call_site(msg, line);
}

TEST(ShapeError, ArangeEmpty) {
  KernelBuilder kb("bad");
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; arange(16, 16); });
  expect_mentions(msg, {"arange:", "[16, 16) is empty", "hi must exceed lo"});
  expect_call_site(msg, line);
}

TEST(ShapeError, ZerosNotPowerOfTwo) {
  KernelBuilder kb("bad");
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; zeros({16, 24}, f32); });
  expect_mentions(msg, {"zeros:", "(16, 24)", "not a power of two (24)"});
  expect_call_site(msg, line);
}

TEST(ShapeError, BroadcastToNotPowerOfTwo) {
  KernelBuilder kb("bad");
  Value x = scalar(1.0, f32);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; x.broadcast_to({12}); });
  expect_mentions(msg, {"broadcast:", "(12,)", "power of two"});
  expect_call_site(msg, line);
}

TEST(ShapeError, ProgramIdAxis3) {
  KernelBuilder kb("bad");
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; program_id(3); });
  expect_mentions(msg, {"program_id:", "axis must be 0, 1 or 2, got 3"});
  expect_call_site(msg, line);
}

TEST(ShapeError, ReduceAxisOutOfRange) {
  KernelBuilder kb("bad");
  Value x = zeros({16, 32}, f32);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; sum(x, 2); });
  expect_mentions(msg, {"sum:", "axis 2 is out of range", "tensor<16x32xf32>", "rank 2"});
  expect_call_site(msg, line);
}

TEST(ShapeError, ReduceOfScalar) {
  KernelBuilder kb("bad");
  Value x = scalar(1.0, f32);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; max(x, 0); });
  expect_mentions(msg, {"max:", "cannot reduce a scalar", "f32"});
  expect_call_site(msg, line);
}

TEST(ShapeError, ReduceBooleans) {
  KernelBuilder kb("bad");
  Value m = arange(0, 16) < 3;
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; sum(m, 0); });
  expect_mentions(msg, {"sum:", "booleans", ".to(i32)"});
  expect_call_site(msg, line);
}

TEST(ShapeError, TransOf1D) {
  KernelBuilder kb("bad");
  Value x = zeros({16}, f32);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; trans(x); });
  expect_mentions(msg, {"trans:", "2-D tile", "tensor<16xf32>", "rank 1"});
  expect_call_site(msg, line);
}

TEST(ShapeError, ReshapeChangesElementCount) {
  KernelBuilder kb("bad");
  Value x = zeros({16, 16}, f32);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; x.reshape({16, 32}); });
  expect_mentions(msg, {"reshape:", "tensor<16x16xf32>", "(16, 32)", "256 vs 512"});
  expect_call_site(msg, line);
}

TEST(ShapeError, ExpandDimsAxisOutOfRange) {
  KernelBuilder kb("bad");
  Value x = zeros({16}, f32);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; x.expand_dims(3); });
  expect_mentions(msg, {"expand_dims:", "axis 3 is out of range", "tensor<16xf32>"});
  expect_call_site(msg, line);
}

// A tile past 2^20 elements is refused at the call that makes it, with its shape, its count and the limit.
TEST(ShapeError, ZerosPastTheLargestTile) {
  KernelBuilder kb("bad");
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; zeros({2048, 1024}, f32); });
  expect_mentions(msg, {"(2048, 1024)", "2097152 elements", "at most 1048576", "smaller tiles"});
  expect_call_site(msg, line);
}

TEST(ShapeError, ArangePastTheLargestTile) {
  KernelBuilder kb("bad");
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; arange(0, int64_t{1} << 21); });
  expect_mentions(msg, {"arange:", "2097152 elements", "at most 1048576"});
  expect_call_site(msg, line);
}

TEST(ShapeError, BroadcastPastTheLargestTile) {
  KernelBuilder kb("bad");
  Value x = arange(0, int64_t{1} << 20).expand_dims(1); // 2^20 elements: the largest tile, accepted
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; x.broadcast_to({int64_t{1} << 20, 8}); });
  expect_mentions(msg, {"broadcast:", "(1048576, 8)", "8388608 elements", "at most 1048576"});
  expect_call_site(msg, line);
}

TEST(ShapeError, DotResultPastTheLargestTile) {
  KernelBuilder kb("bad");
  Value a = zeros({2048, 16}, f16), b = zeros({16, 2048}, f16); // operands of 32768 elements each
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; dot(a, b); });
  expect_mentions(msg, {"dot:", "(2048, 2048)", "4194304 elements", "at most 1048576"});
  expect_call_site(msg, line);
}

TEST(ShapeError, BlockPointerPastTheLargestTile) {
  KernelBuilder kb("bad");
  Value out = kb.arg_ptr("out", f32);
  unsigned line = 0;
  std::string msg = user_error([&] {
    line = __LINE__; make_block_ptr(out, {16, 14}, {16, 1}, {0, 14}, {int64_t{1} << 20, 8}, {1, 0});
  });
  expect_mentions(msg, {"make_block_ptr:", "(1048576, 8)", "8388608 elements", "at most 1048576"});
  expect_call_site(msg, line);
}

TEST(ShapeError, ShapeWhoseCountOverflowsIsRefusedNotWrapped) {
  KernelBuilder kb("bad");
  const int64_t huge = int64_t{1} << 40; // a power of two, so only the size rule can refuse it
  std::string msg = user_error([&] { zeros({huge, huge}, f32); });
  expect_mentions(msg, {"more elements than an int64 counts", "at most 1048576"});
}

TEST(ShapeError, TheLargestTileIsAccepted) {
  KernelBuilder kb("ok");
  Value x = zeros({1024, 1024}, f32);
  EXPECT_EQ(x.type().numel(), int64_t{1} << 20);
}

} // namespace
