// Error tests for tile shapes: sources (arange, zeros, program_id), reductions, trans, reshape.
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

} // namespace
