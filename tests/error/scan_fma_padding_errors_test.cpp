// Error tests for the scans (a scalar, an axis out of range, booleans), fma/log1p/expm1 on integers or with
// operands that do not broadcast, padding an integer block with a value it cannot hold, and the interpreter's
// message for a missing or extra argument (which parameter, by name, position and type).
#include "dsl/dsl.h"
#include "dsl/interpreter.h"
#include "error/error_test_support.h"

#include <string>

using namespace kiln;
using kiln_test::expect_call_site;
using kiln_test::expect_mentions;
using kiln_test::user_error;

namespace {

TEST(ScanError, OfAScalar) {
  KernelBuilder kb("bad");
  Value s = kb.arg("s", f32);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; cumsum(s, 0); });
  expect_mentions(msg, {"cumsum:", "cannot scan a scalar", "f32", "rank 1 or more"});
  expect_call_site(msg, line);
}

TEST(ScanError, AxisOutOfRange) {
  KernelBuilder kb("bad");
  Value x = zeros({4, 8}, f32);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; cummax(x, 2); });
  expect_mentions(msg, {"cummax:", "axis 2 is out of range", "tensor<4x8xf32>", "valid axes are 0 to 1"});
  expect_call_site(msg, line);
  msg = user_error([&] { line = __LINE__; cummin(x, -3, true); });
  expect_mentions(msg, {"cummin:", "axis -1 is out of range"});
  expect_call_site(msg, line);
}

TEST(ScanError, OfBooleans) {
  KernelBuilder kb("bad");
  Value b = arange(0, 16) < 5;
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; cumsum(b, 0); });
  expect_mentions(msg, {"cumsum:", "cannot scan booleans", ".to(i32)"});
  expect_call_site(msg, line);
}

TEST(FmaError, OfIntegers) {
  KernelBuilder kb("bad");
  Value i = arange(0, 16);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; kiln::fma(i, i, 1); });
  expect_mentions(msg, {"fma:", "floating-point", "i32", ".to(f32)"});
  expect_call_site(msg, line);
}

TEST(FmaError, OperandsThatDoNotBroadcast) {
  KernelBuilder kb("bad");
  Value a = zeros({16}, f32), c = zeros({32}, f32);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; kiln::fma(a, a, c); });
  expect_mentions(msg, {"fma:", "(16,)", "(32,)", "do not broadcast"});
  expect_call_site(msg, line);
}

TEST(Log1pExpm1Error, OfIntegers) {
  KernelBuilder kb("bad");
  Value i = arange(0, 16);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; kiln::log1p(i); });
  expect_mentions(msg, {"log1p:", "floating-point operand", "i32", ".to(f32)"});
  expect_call_site(msg, line);
  msg = user_error([&] { line = __LINE__; kiln::expm1(i); });
  expect_mentions(msg, {"expm1:", "floating-point operand"});
  expect_call_site(msg, line);
}

TEST(PaddingError, IntegerBlockPaddedWithAFraction) {
  KernelBuilder kb("bad");
  Value x = kb.arg_ptr("x", i32);
  Value bp = make_block_ptr(x, {100}, {1}, {0}, {32}, {0});
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; load(bp, {0}, 2.5); });
  expect_mentions(msg, {"load_block:", "padding 2.5", "i32", "an integer in its range"});
  expect_call_site(msg, line);
  msg = user_error([&] { line = __LINE__; load(bp, {0}, 3e9); }); // past i32's range
  expect_mentions(msg, {"load_block:", "padding 3", "[-2147483648, 2147483647]"});
  expect_call_site(msg, line);
}

// The interpreter names what is missing: the first parameter without an argument, by position, name and type.
TEST(InterpreterArgumentError, MissingArgumentIsNamed) {
  KernelBuilder kb("axpy");
  Value x = kb.arg_ptr("x", f32), y = kb.arg_ptr("y", f32), a = kb.arg("a", f32), n = kb.arg("n", i32);
  Value offs = arange(0, 16);
  store(y + offs, load(x + offs, offs < n, 0.0f) * a, offs < n);
  Kernel k = kb.finish();
  HostBuffer hx(f32, 16, "x"), hy(f32, 16, "y");
  std::string msg = user_error([&] {
    interpret(k, {1, 1, 1}, {InterpArg::ptr(hx), InterpArg::ptr(hy), InterpArg::of_float(2)});
  });
  expect_mentions(msg,
                  {"kernel 'axpy' takes 4 arguments (x, y, a, n), got 3", "argument 4 'n' (i32) is missing"});
  msg = user_error([&] { interpret(k, {1, 1, 1}, {InterpArg::ptr(hx)}); });
  expect_mentions(
      msg, {"got 1", "argument 2 'y' (ptr<f32>), argument 3 'a' (f32), argument 4 'n' (i32) are missing"});
  msg = user_error([&] {
    interpret(k, {1, 1, 1},
              {InterpArg::ptr(hx), InterpArg::ptr(hy), InterpArg::of_float(2), InterpArg::of_int(16),
               InterpArg::of_int(1)});
  });
  expect_mentions(msg, {"got 5", "1 too many"});
}

} // namespace
