// Error tests for dot: one bad program each (shapes, dtypes, accumulator, tf32).
#include "dsl/dsl.h"
#include "error/error_test_support.h"

using namespace kiln;
using kiln_test::expect_call_site;
using kiln_test::expect_mentions;
using kiln_test::user_error;

namespace {

TEST(DotError, InnerDimsDiffer) {
  KernelBuilder kb("bad");
  Value a = zeros({32, 16}, f16), b = zeros({32, 64}, f16);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; dot(a, b); });
  expect_mentions(msg, {"dot:", "inner dimensions differ", "tensor<32x16xf16>", "tensor<32x64xf16>", "(K, N)"});
  expect_call_site(msg, line);
}

TEST(DotError, F16TimesBf16) {
  KernelBuilder kb("bad");
  Value a = zeros({32, 32}, f16), b = zeros({32, 32}, bf16);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; dot(a, b); });
  expect_mentions(msg, {"dot:", "dtypes differ", "f16", "bf16", ".to("});
  expect_call_site(msg, line);
}

TEST(DotError, OperandNot2D) {
  KernelBuilder kb("bad");
  Value a = zeros({32}, f16), b = zeros({32, 32}, f16);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; dot(a, b); });
  expect_mentions(msg, {"dot:", "2-D", "tensor<32xf16>"});
  expect_call_site(msg, line);
}

TEST(DotError, OperandNot2DWithAccumulator) {
  KernelBuilder kb("bad");
  Value a = zeros({2, 32, 32}, f16), b = zeros({32, 32}, f16), acc = zeros({32, 32}, f32);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; dot(a, b, acc); });
  expect_mentions(msg, {"dot:", "2-D", "tensor<2x32x32xf16>"});
  expect_call_site(msg, line);
}

TEST(DotError, AccumulatorWrongShape) {
  KernelBuilder kb("bad");
  Value a = zeros({32, 16}, f16), b = zeros({16, 64}, f16), acc = zeros({32, 32}, f32);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; dot(a, b, acc); });
  expect_mentions(msg, {"dot:", "accumulator must be tensor<32x64xf32>", "tensor<32x32xf32>"});
  expect_call_site(msg, line);
}

TEST(DotError, AccumulatorWrongDtype) {
  KernelBuilder kb("bad");
  Value a = zeros({32, 16}, bf16), b = zeros({16, 32}, bf16), acc = zeros({32, 32}, bf16);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; dot(a, b, acc); });
  expect_mentions(msg, {"dot:", "accumulator must be tensor<32x32xf32>", "tensor<32x32xbf16>"});
  expect_call_site(msg, line);
}

TEST(DotError, IntegerOperands) {
  KernelBuilder kb("bad");
  Value a = zeros({32, 32}, i32), b = zeros({32, 32}, i32);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; dot(a, b); });
  expect_mentions(msg, {"dot:", "unsupported operand dtype i32", "f16, bf16, f32 or f64"});
  expect_call_site(msg, line);
}

TEST(DotError, Tf32OnF16) {
  KernelBuilder kb("bad");
  Value a = zeros({32, 32}, f16), b = zeros({32, 32}, f16), acc = zeros({32, 32}, f32);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; dot(a, b, acc, /*tf32=*/true); });
  expect_mentions(msg, {"dot:", "tf32", "f32 operands only", "f16"});
  expect_call_site(msg, line);
}

TEST(DotError, BlockPointerOperand) {
  KernelBuilder kb("bad");
  Value p = kb.arg_ptr("p", f16);
  Value bp = make_block_ptr(p, {64, 64}, {64, 1}, {0, 0}, {32, 32}, {1, 0});
  Value b = zeros({32, 32}, f16);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; dot(bp, b); });
  expect_mentions(msg, {"dot:", "block_ptr<32x32xf16", "load("});
  expect_call_site(msg, line);
}

} // namespace
