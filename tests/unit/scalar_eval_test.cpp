// The scalar evaluator (dsl/scalar_eval.h), rule by rule: integer wrapping and its report, C division with a
// zero divisor an Error, casts (float -> int saturating through i64, anything -> i1), rounding to the dtype,
// and the NaN rules of min, max and comparisons.
#include "dsl/scalar_eval.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

using namespace kiln;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
constexpr int64_t kI32Min = std::numeric_limits<int32_t>::min();
constexpr int64_t kI32Max = std::numeric_limits<int32_t>::max();

ScalarValue i32v(int64_t v) { return ScalarValue::of_int(v, DType::i32); }
ScalarValue f32v(double v) { return ScalarValue::of_float(v, DType::f32); }

TEST(ScalarEval, IntegerArithmeticWrapsToTheWidthAndSaysSo) {
  EXPECT_EQ(int_binary(BinaryOp::Add, kI32Max, 1, DType::i32).value, kI32Min);
  EXPECT_TRUE(int_binary(BinaryOp::Add, kI32Max, 1, DType::i32).wrapped);
  EXPECT_FALSE(int_binary(BinaryOp::Add, kI32Max - 1, 1, DType::i32).wrapped);
  EXPECT_EQ(int_binary(BinaryOp::Sub, 0, 1, DType::u8).value, 255);
  EXPECT_TRUE(int_binary(BinaryOp::Sub, 0, 1, DType::u8).wrapped);
  EXPECT_EQ(int_binary(BinaryOp::Mul, 1 << 16, 1 << 16, DType::i32).value, 0);
  EXPECT_TRUE(int_binary(BinaryOp::Mul, 1 << 16, 1 << 16, DType::i32).wrapped);
  // i64 wraps modulo 2^64 without undefined behaviour, and reports it.
  EXPECT_EQ(int_binary(BinaryOp::Add, kI64Max, 1, DType::i64).value, kI64Min);
  EXPECT_TRUE(int_binary(BinaryOp::Add, kI64Max, 1, DType::i64).wrapped);
  EXPECT_EQ(int_binary(BinaryOp::Mul, int64_t{1} << 62, 4, DType::i64).value, 0);
  EXPECT_TRUE(int_binary(BinaryOp::Mul, int64_t{1} << 62, 4, DType::i64).wrapped);
  EXPECT_FALSE(int_binary(BinaryOp::Mul, int64_t{1} << 40, 1 << 20, DType::i64).wrapped);
  EXPECT_EQ(eval_binary(BinaryOp::Add, i32v(kI32Max), i32v(2)).i, kI32Min + 1);
  // i64 stays exact beyond 2^53, where a double would not.
  const int64_t big = (int64_t{1} << 53) + 1;
  EXPECT_EQ(eval_binary(BinaryOp::Add, ScalarValue::of_int(big, DType::i64), ScalarValue::of_int(2, DType::i64)).i,
            big + 2);
}

TEST(ScalarEval, DivisionTruncatesLikeC) {
  EXPECT_EQ(eval_binary(BinaryOp::Div, i32v(-7), i32v(2)).i, -3);
  EXPECT_EQ(eval_binary(BinaryOp::Rem, i32v(-7), i32v(2)).i, -1);
  EXPECT_EQ(eval_binary(BinaryOp::Rem, i32v(7), i32v(-2)).i, 1);
  // MIN / -1 wraps to MIN; MIN % -1 is 0 (both undefined in C).
  EXPECT_EQ(int_binary(BinaryOp::Div, kI32Min, -1, DType::i32).value, kI32Min);
  EXPECT_TRUE(int_binary(BinaryOp::Div, kI32Min, -1, DType::i32).wrapped);
  EXPECT_EQ(int_binary(BinaryOp::Div, kI64Min, -1, DType::i64).value, kI64Min);
  EXPECT_TRUE(int_binary(BinaryOp::Div, kI64Min, -1, DType::i64).wrapped);
  EXPECT_EQ(int_binary(BinaryOp::Rem, kI64Min, -1, DType::i64).value, 0);
  EXPECT_FALSE(int_binary(BinaryOp::Rem, kI64Min, -1, DType::i64).wrapped);
}

TEST(ScalarEval, IntegerDivisionByZeroIsAnError) {
  EXPECT_TRUE(divides_by_zero(BinaryOp::Div, 0));
  EXPECT_TRUE(divides_by_zero(BinaryOp::Rem, 0));
  EXPECT_FALSE(divides_by_zero(BinaryOp::Mul, 0));
  EXPECT_FALSE(divides_by_zero(BinaryOp::Div, 3));
  try {
    eval_binary(BinaryOp::Div, i32v(5), i32v(0));
    FAIL() << "5 / 0 must throw";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("division by zero (5 / 0)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(int_binary(BinaryOp::Rem, 5, 0, DType::i64), Error);
  // Float division by zero is IEEE's.
  EXPECT_EQ(eval_binary(BinaryOp::Div, f32v(1), f32v(0)).f, kInf);
  EXPECT_TRUE(std::isnan(eval_binary(BinaryOp::Div, f32v(0), f32v(0)).f));
}

TEST(ScalarEval, ComparisonsGiveBooleans) {
  const ScalarValue lt = eval_binary(BinaryOp::Lt, i32v(-1), i32v(0));
  EXPECT_EQ(lt.dtype, DType::i1);
  EXPECT_EQ(lt.i, 1);
  EXPECT_EQ(eval_binary(BinaryOp::Ge, i32v(-1), i32v(0)).i, 0);
  // u8 holds 255 as 255, not -1.
  EXPECT_EQ(eval_binary(BinaryOp::Gt, ScalarValue::of_int(255, DType::u8), ScalarValue::of_int(1, DType::u8)).i, 1);
}

TEST(ScalarEval, NaNRules) {
  // min/max ignore one NaN (CUDA's fminf/fmaxf); NaN only when both are.
  EXPECT_EQ(eval_binary(BinaryOp::Max, f32v(kNaN), f32v(2)).f, 2);
  EXPECT_EQ(eval_binary(BinaryOp::Min, f32v(3), f32v(kNaN)).f, 3);
  EXPECT_TRUE(std::isnan(eval_binary(BinaryOp::Max, f32v(kNaN), f32v(kNaN)).f));
  // Every comparison with NaN is false except !=.
  for (BinaryOp op : {BinaryOp::Eq, BinaryOp::Lt, BinaryOp::Le, BinaryOp::Gt, BinaryOp::Ge})
    EXPECT_EQ(eval_binary(op, f32v(kNaN), f32v(kNaN)).i, 0) << binary_name(op);
  EXPECT_EQ(eval_binary(BinaryOp::Ne, f32v(kNaN), f32v(1)).i, 1);
  // NaN -> int is 0, NaN -> i1 is true (x != 0).
  EXPECT_EQ(eval_cast(f32v(kNaN), DType::i32).i, 0);
  EXPECT_EQ(eval_cast(f32v(kNaN), DType::i1).i, 1);
}

TEST(ScalarEval, FloatToIntTruncatesSaturatesThroughI64AndWraps) {
  EXPECT_EQ(float_to_int(-2.7, DType::i32), -2);
  EXPECT_EQ(float_to_int(2.7, DType::i32), 2);
  EXPECT_EQ(float_to_int(1e30, DType::i64), kI64Max);
  EXPECT_EQ(float_to_int(-1e30, DType::i64), kI64Min);
  EXPECT_EQ(float_to_int(kInf, DType::i64), kI64Max);
  // Saturates at i64, then wraps to the width: 2^32 + 5 -> 5 in i32, i64's maximum -> -1.
  EXPECT_EQ(float_to_int(4294967301.0, DType::i32), 5);
  EXPECT_EQ(float_to_int(1e30, DType::i32), -1);
  EXPECT_EQ(float_to_int(300.0, DType::u8), 44);
  EXPECT_EQ(float_to_int(0.25, DType::i1), 1);
  EXPECT_EQ(float_to_int(0.0, DType::i1), 0);
}

TEST(ScalarEval, CastsBetweenDtypes) {
  EXPECT_EQ(eval_cast(i32v(-1), DType::u8).i, 255);
  EXPECT_EQ(eval_cast(i32v(256), DType::u8).i, 0);
  EXPECT_EQ(eval_cast(i32v(-5), DType::i1).i, 1);
  EXPECT_EQ(eval_cast(ScalarValue::of_int(int64_t{1} << 40, DType::i64), DType::i32).i, 0);
  EXPECT_TRUE(cast_int(int64_t{1} << 40, DType::i32).wrapped);
  EXPECT_FALSE(cast_int(kI32Max, DType::i32).wrapped);
  // int -> f32 rounds once from the integer (2^24 + 1 is not an f32).
  EXPECT_EQ(eval_cast(ScalarValue::of_int((1 << 24) + 1, DType::i32), DType::f32).f, 16777216.0);
  EXPECT_EQ(eval_cast(ScalarValue::of_int(2049, DType::i32), DType::f16).f, 2048.0);
  // float -> float rounds to the target (f16's largest finite is 65504; beyond it overflows to inf).
  EXPECT_EQ(eval_cast(f32v(1.0 / 3), DType::f64).f, static_cast<double>(1.0f / 3));
  EXPECT_EQ(eval_cast(f32v(70000), DType::f16).f, kInf);
}

TEST(ScalarEval, FloatResultsRoundOnceToTheirDtype) {
  // 1 + 2^-24 is exact in double and rounds to 1 in f32 (ties to even); in f64 it stays.
  const double tiny = std::ldexp(1.0, -24);
  EXPECT_EQ(eval_binary(BinaryOp::Add, f32v(1), f32v(tiny)).f, 1.0);
  const ScalarValue one64 = ScalarValue::of_float(1, DType::f64);
  EXPECT_EQ(eval_binary(BinaryOp::Add, one64, ScalarValue::of_float(tiny, DType::f64)).f, 1.0 + tiny);
  EXPECT_EQ(ScalarValue::of_float(0.1, DType::f32).f, static_cast<double>(0.1f));
  EXPECT_EQ(ScalarValue::of_float(1.0 + 1.0 / 1024 + 1.0 / 4096, DType::bf16).f, 1.0); // 8 mantissa bits
  EXPECT_EQ(eval_unary(UnaryOp::Sqrt, f32v(2)).f, static_cast<double>(std::sqrt(2.0f)));
}

TEST(ScalarEval, UnaryIntegerRules) {
  EXPECT_EQ(eval_unary(UnaryOp::Neg, i32v(kI32Min)).i, kI32Min); // -MIN wraps to MIN
  EXPECT_TRUE(int_unary(UnaryOp::Neg, kI32Min, DType::i32).wrapped);
  EXPECT_EQ(eval_unary(UnaryOp::Abs, i32v(-7)).i, 7);
  EXPECT_TRUE(int_unary(UnaryOp::Abs, kI64Min, DType::i64).wrapped);
  EXPECT_EQ(eval_unary(UnaryOp::Not, ScalarValue::of_int(1, DType::i1)).i, 0);
  EXPECT_EQ(eval_unary(UnaryOp::Not, ScalarValue::of_int(0, DType::i1)).i, 1);
  EXPECT_THROW(eval_unary(UnaryOp::Exp, i32v(1)), InternalError);
}

TEST(ScalarEval, WhereAndConstants) {
  EXPECT_EQ(eval_where(ScalarValue::of_int(1, DType::i1), i32v(4), i32v(5)).i, 4);
  EXPECT_EQ(eval_where(ScalarValue::of_int(0, DType::i1), i32v(4), i32v(5)).i, 5);
  Op c;
  c.kind = OpKind::Constant;
  c.f = -2.5;
  EXPECT_EQ(eval_constant(c, DType::i32).i, -2); // a non-integer value converts as a cast
  EXPECT_EQ(eval_constant(c, DType::f16).f, -2.5);
  c.ints = {kI64Max}; // an exact integer stays exact, beyond what f holds
  EXPECT_EQ(eval_constant(c, DType::i64).i, kI64Max);
  EXPECT_EQ(ScalarValue::of_double(3.9, DType::i32).i, 3);
}

} // namespace
