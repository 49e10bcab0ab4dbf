// Integer intervals of the address analysis (analysis/interval.h): each op's range from its endpoints by the
// interpreter's rules, unknown wherever an endpoint wraps in the result's dtype or the op is not monotone.
#include "analysis/interval.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>

using namespace kiln;

namespace {

constexpr int64_t kI32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kI32Min = std::numeric_limits<int32_t>::min();

void expect_range(const Interval& r, int64_t lo, int64_t hi) {
  ASSERT_TRUE(r.known);
  EXPECT_EQ(r.lo, lo);
  EXPECT_EQ(r.hi, hi);
}

TEST(Interval, ArithmeticTakesTheExtremeCorners) {
  expect_range(interval_binary(BinaryOp::Add, Interval::of(0, 3), Interval::of(10, 20), DType::i32), 10, 23);
  expect_range(interval_binary(BinaryOp::Sub, Interval::of(0, 3), Interval::of(10, 20), DType::i32), -20, -7);
  expect_range(interval_binary(BinaryOp::Mul, Interval::of(-2, 3), Interval::of(-5, 4), DType::i32), -15, 12);
  expect_range(interval_binary(BinaryOp::Div, Interval::of(-7, 9), Interval::of(2, 4), DType::i32), -3, 4);
  expect_range(interval_binary(BinaryOp::Min, Interval::of(0, 10), Interval::of(5, 6), DType::i32), 0, 6);
  expect_range(interval_binary(BinaryOp::Max, Interval::of(0, 10), Interval::of(5, 6), DType::i32), 5, 10);
  expect_range(interval_binary(BinaryOp::Lt, Interval::unknown(), Interval::unknown(), DType::i32), 0, 1);
}

TEST(Interval, AnEndpointThatWrapsMakesTheRangeUnknown) {
  // In i32, kI32Max + 1 wraps: the values between the wrapped endpoints are not an interval.
  EXPECT_FALSE(
      interval_binary(BinaryOp::Add, Interval::of(0, kI32Max), Interval::exact(1), DType::i32).known);
  // The same sum fits i64.
  expect_range(interval_binary(BinaryOp::Add, Interval::of(0, kI32Max), Interval::exact(1), DType::i64), 1,
               kI32Max + 1);
  EXPECT_FALSE(
      interval_binary(BinaryOp::Mul, Interval::of(0, 1 << 16), Interval::exact(1 << 16), DType::i32).known);
  EXPECT_FALSE(interval_unary(UnaryOp::Neg, Interval::of(kI32Min, 0), DType::i32).known); // -MIN wraps
  EXPECT_FALSE(interval_cast(Interval::of(0, 300), DType::u8).known);
  expect_range(interval_cast(Interval::of(0, 255), DType::u8), 0, 255);
  expect_range(interval_cast(Interval::unknown(), DType::i1), 0, 1);
}

TEST(Interval, DivisionAndRemainderNeedADivisorOfOneSign) {
  EXPECT_FALSE(interval_binary(BinaryOp::Div, Interval::of(0, 9), Interval::of(-1, 1), DType::i32).known);
  EXPECT_FALSE(interval_binary(BinaryOp::Rem, Interval::of(0, 9), Interval::of(0, 4), DType::i32).known);
  // |a % b| < |b|, with the sign of a.
  expect_range(interval_binary(BinaryOp::Rem, Interval::of(0, 100), Interval::of(1, 8), DType::i32), 0, 7);
  expect_range(interval_binary(BinaryOp::Rem, Interval::of(-100, 3), Interval::exact(8), DType::i32), -7, 3);
}

TEST(Interval, UnaryAndBitwise) {
  expect_range(interval_unary(UnaryOp::Neg, Interval::of(-3, 5), DType::i32), -5, 3);
  expect_range(interval_unary(UnaryOp::Abs, Interval::of(-3, 5), DType::i32), 0, 5);
  expect_range(interval_unary(UnaryOp::Abs, Interval::of(-9, -4), DType::i32), 4, 9);
  // Bitwise ops are bounded for non-negative operands only.
  expect_range(interval_binary(BinaryOp::And, Interval::of(0, 12), Interval::of(0, 7), DType::i32), 0, 7);
  expect_range(interval_binary(BinaryOp::Or, Interval::of(0, 12), Interval::of(0, 7), DType::i32), 0, 19);
  EXPECT_FALSE(interval_binary(BinaryOp::And, Interval::of(-1, 12), Interval::of(0, 7), DType::i32).known);
}

TEST(Interval, HullAndContainment) {
  expect_range(hull(Interval::of(0, 3), Interval::of(8, 9)), 0, 9);
  EXPECT_FALSE(hull(Interval::of(0, 3), Interval::unknown()).known);
  EXPECT_TRUE(Interval::unknown().contains(Interval::of(0, 3)));
  EXPECT_FALSE(Interval::of(0, 3).contains(Interval::unknown()));
  EXPECT_TRUE(Interval::of(0, 3).contains(Interval::of(1, 2)));
}

} // namespace
