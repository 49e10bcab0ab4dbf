// Error tests for elementwise arithmetic: broadcasting, dtype rules of unary ops, pointers, literals.
#include "dsl/dsl.h"
#include "error/error_test_support.h"

using namespace kiln;
using kiln_test::expect_call_site;
using kiln_test::expect_mentions;
using kiln_test::user_error;

namespace {

TEST(ElementwiseError, ShapesDoNotBroadcast) {
  KernelBuilder kb("bad");
  Value a = zeros({16, 32}, f32), b = zeros({16, 64}, f32);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; Value c = a + b; });
  expect_mentions(msg, {"add:", "(16, 32)", "(16, 64)", "do not broadcast", "32 vs 64"});
  expect_call_site(msg, line);
}

TEST(ElementwiseError, RowVectorMeetsColumnOfOtherLength) {
  KernelBuilder kb("bad");
  Value a = arange(0, 32), b = arange(0, 16);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; Value c = a * b; });
  expect_mentions(msg, {"mul:", "(32,)", "(16,)"});
  expect_call_site(msg, line);
}

TEST(ElementwiseError, ExpOfInteger) {
  KernelBuilder kb("bad");
  Value x = arange(0, 16);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; exp(x); });
  expect_mentions(msg, {"exp:", "floating-point", "tensor<16xi32>", ".to(f32)"});
  expect_call_site(msg, line);
}

TEST(ElementwiseError, NotOfFloat) {
  KernelBuilder kb("bad");
  Value x = zeros({16}, f32);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; Value y = !x; });
  expect_mentions(msg, {"not: takes a boolean (i1)", "tensor<16xf32>"});
  expect_call_site(msg, line);
}

TEST(ElementwiseError, NegateBoolean) {
  KernelBuilder kb("bad");
  Value m = arange(0, 16) < 4; // (16,) i1
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; Value y = -m; });
  expect_mentions(msg, {"neg: takes a number", "tensor<16xi1>", "`!`"});
  expect_call_site(msg, line);
}

TEST(ElementwiseError, FloatAndOfFloats) {
  KernelBuilder kb("bad");
  Value x = zeros({16}, f32);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; Value y = x & x; });
  expect_mentions(msg, {"and: takes booleans or integers", "tensor<16xf32>"});
  expect_call_site(msg, line);
}

TEST(ElementwiseError, MultiplyPointers) {
  KernelBuilder kb("bad");
  Value p = kb.arg_ptr("p", f32);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; Value y = p * arange(0, 16); });
  expect_mentions(msg, {"mul:", "pointer + offsets", "ptr<f32>"});
  expect_call_site(msg, line);
}

TEST(ElementwiseError, ArithmeticOnBlockPointer) {
  KernelBuilder kb("bad");
  Value p = kb.arg_ptr("p", f32);
  Value bp = make_block_ptr(p, {64}, {1}, {0}, {16}, {0});
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; Value y = bp + 16; });
  expect_mentions(msg, {"add:", "block pointer", "advance("});
  expect_call_site(msg, line);
}

TEST(ElementwiseError, PointerPlusFloatOffsets) {
  KernelBuilder kb("bad");
  Value p = kb.arg_ptr("p", f32);
  Value offs = zeros({16}, f32);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; Value y = p + offs; });
  expect_mentions(msg, {"addptr:", "offsets must be integers", "tensor<16xf32>"});
  expect_call_site(msg, line);
}

TEST(ElementwiseError, FractionalLiteralInIntegerFull) {
  KernelBuilder kb("bad");
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; full({16}, 0.5, i32); });
  expect_mentions(msg, {"full:", "0.5", "not an integer", "i32"});
  expect_call_site(msg, line);
}

TEST(ElementwiseError, LiteralTooBigForTile) {
  KernelBuilder kb("bad");
  Value x = arange(0, 16);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; Value y = x + int64_t{5000000000}; });
  expect_mentions(msg, {"5000000000", "does not fit in i32", ".to()"});
  expect_call_site(msg, line);
}

TEST(ElementwiseError, WhereOnFloatCondition) {
  KernelBuilder kb("bad");
  Value c = zeros({16}, f32), a = zeros({16}, f32);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; where(c, a, 1.0f); });
  expect_mentions(msg, {"where:", "condition must be boolean (i1)", "tensor<16xf32>"});
  expect_call_site(msg, line);
}

TEST(ElementwiseError, ConvertPointerToNumber) {
  KernelBuilder kb("bad");
  Value p = kb.arg_ptr("p", f32);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; p.to(i64); });
  expect_mentions(msg, {"to: cannot convert ptr<f32> to i64", "only numbers"});
  expect_call_site(msg, line);
}

} // namespace
