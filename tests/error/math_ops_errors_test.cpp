// Error tests for tanh, sigmoid, erf, sin, cos and pow on integer or boolean operands (refused, as exp
// refuses them: the message names the op and the dtype and says how to convert), and for -inf padding of
// an integer block.
#include "dsl/dsl.h"
#include "error/error_test_support.h"

#include <functional>
#include <string>
#include <utility>
#include <vector>

using namespace kiln;
using kiln_test::expect_call_site;
using kiln_test::expect_mentions;
using kiln_test::user_error;

namespace {

std::vector<std::pair<std::string, std::function<Value(const Value&)>>> unary_ops() {
  return {{"tanh", [](const Value& x) { return kiln::tanh(x); }},
          {"sigmoid", [](const Value& x) { return kiln::sigmoid(x); }},
          {"erf", [](const Value& x) { return kiln::erf(x); }},
          {"sin", [](const Value& x) { return kiln::sin(x); }},
          {"cos", [](const Value& x) { return kiln::cos(x); }}};
}

TEST(MathOpsError, UnaryOfIntegerTile) {
  for (const auto& [name, fn] : unary_ops()) {
    KernelBuilder kb("bad");
    Value x = arange(0, 16);
    // The call site is the lambda in unary_ops(); the op and the dtype are what this test asserts.
    std::string msg = user_error([&] { fn(x); });
    expect_mentions(msg, {name + ":", "floating-point", "tensor<16xi32>", ".to(f32)"});
  }
}

TEST(MathOpsError, TanhOfI64ScalarNamesTheCallSite) {
  KernelBuilder kb("bad");
  Value n = kb.arg("n", i64);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; kiln::tanh(n); });
  expect_mentions(msg, {"tanh:", "floating-point", "i64", ".to(f32)"});
  expect_call_site(msg, line);
}

TEST(MathOpsError, SigmoidOfBooleans) {
  KernelBuilder kb("bad");
  Value m = arange(0, 16) < 4; // (16,) i1
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; kiln::sigmoid(m); });
  expect_mentions(msg, {"sigmoid:", "floating-point", "tensor<16xi1>"});
  expect_call_site(msg, line);
}

TEST(MathOpsError, SinOfU8Tile) {
  KernelBuilder kb("bad");
  Value p = kb.arg_ptr("p", u8);
  Value x = load(p + arange(0, 16));
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; kiln::sin(x); });
  expect_mentions(msg, {"sin:", "floating-point", "tensor<16xu8>", ".to(f32)"});
  expect_call_site(msg, line);
}

TEST(MathOpsError, PowOfIntegers) {
  KernelBuilder kb("bad");
  Value x = arange(0, 16);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; kiln::pow(x, 2); });
  expect_mentions(msg, {"pow:", "floating-point", "tensor<16xi32>", ".to(f32)"});
  expect_call_site(msg, line);
}

TEST(MathOpsError, PowOfBooleans) {
  KernelBuilder kb("bad");
  Value m = arange(0, 16) < 4;
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; kiln::pow(m, m); });
  expect_mentions(msg, {"pow:", "floating-point", "tensor<16xi1>"});
  expect_call_site(msg, line);
}

TEST(MathOpsError, PowOperandsDoNotBroadcast) {
  KernelBuilder kb("bad");
  Value a = zeros({16}, f32), b = zeros({32}, f32);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; kiln::pow(a, b); });
  expect_mentions(msg, {"pow:", "(16,)", "(32,)"});
  expect_call_site(msg, line);
}

TEST(MathOpsError, NegInfPaddingOnIntegerBlock) {
  KernelBuilder kb("bad");
  Value x = kb.arg_ptr("x", i32);
  Value bp = make_block_ptr(x, {128}, {1}, {0}, {32}, {0});
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; load(bp, {0}, Padding::NegInf); });
  expect_mentions(msg, {"load_block:", "padding -inf", "floating-point", "i32"});
  expect_call_site(msg, line);
}

} // namespace
