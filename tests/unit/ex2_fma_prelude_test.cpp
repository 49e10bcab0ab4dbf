// 2^x on the FMA pipe (codegen/prelude/kiln_ex2_fma.cuh), compiled here as host C++: its error over the f32
// line against exact 2^x, 2^j exact at every integer (2^0 is 1), and its edges (0 below -125 and at -inf,
// +inf from 128 up, NaN for NaN).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

namespace {
int32_t f32_bits(float x) {
  int32_t b;
  std::memcpy(&b, &x, sizeof b);
  return b;
}
float bits_f32(int32_t b) {
  float x;
  std::memcpy(&x, &b, sizeof x);
  return x;
}
} // namespace

#define KILN_EX2_FMA_FN inline
#define KILN_F32_BITS(x) f32_bits(x)
#define KILN_BITS_F32(x) bits_f32(x)
#include "codegen/prelude/kiln_ex2_fma.cuh"

namespace kiln {
namespace {

// |got - 2^x| in units of the last place of 2^x rounded to f32.
double ulp_error(float x, float got) {
  const double want = std::exp2(static_cast<double>(x));
  const float wf = static_cast<float>(want);
  const double ulp = std::nextafter(wf, INFINITY) - wf;
  return std::fabs(static_cast<double>(got) - want) / ulp;
}

TEST(Ex2FmaPrelude, WithinAboutTwoUlpFromMinus125To128) {
  // Every 37th f32 of [-125, 128) (both signs' bit patterns walked up from 0): about 60 million values, every
  // binade of f and every integer j.
  double worst = 0;
  float worst_x = 0;
  int64_t checked = 0;
  auto check = [&](float x) {
    const double e = ulp_error(x, ex2_fma(x));
    if (e > worst)
      worst = e, worst_x = x;
    ++checked;
  };
  for (uint32_t bits = 0; bits_f32(static_cast<int32_t>(bits)) < 128.0f; bits += 37)
    check(bits_f32(static_cast<int32_t>(bits)));
  for (uint32_t bits = 0x80000000u; bits_f32(static_cast<int32_t>(bits)) >= -125.0f; bits += 37)
    check(bits_f32(static_cast<int32_t>(bits)));
  EXPECT_GT(checked, 50'000'000);
  EXPECT_LE(worst, 2.05) << "at x = " << worst_x; // ex2.approx documents 2
  // The binade edges next to 128 and -125, and each integer, where f = 0: exactly 2^j.
  for (float x : {std::nextafter(128.0f, 0.0f), 127.5f, -125.0f, std::nextafter(-125.0f, 0.0f)})
    EXPECT_LE(ulp_error(x, ex2_fma(x)), 2.05) << x;
  for (int j = -125; j <= 127; ++j)
    EXPECT_EQ(ex2_fma(static_cast<float>(j)), std::ldexp(1.0f, j)) << j;
}

TEST(Ex2FmaPrelude, ExactlyOneAtZeroSoThatALazyRescaleStillSkips) {
  EXPECT_EQ(ex2_fma(0.0f), 1.0f);
  EXPECT_EQ(ex2_fma(-0.0f), 1.0f);
}

TEST(Ex2FmaPrelude, EdgesAsEx2ApproxFtzGivesThemBut0From125Down) {
  const float inf = std::numeric_limits<float>::infinity();
  // Below -125: 0 (ex2.approx.ftz gives 2^x down to 2^-126, at most 3e-38, then 0); -inf, a masked score,
  // too.
  for (float x : {std::nextafter(-125.0f, -inf), -125.5f, -126.0f, -127.0f, -150.0f, -1e30f, -inf})
    EXPECT_EQ(ex2_fma(x), 0.0f) << x;
  // From 128 up: +inf, as 2^x overflows f32.
  for (float x : {128.0f, 128.5f, 1e30f, inf})
    EXPECT_EQ(ex2_fma(x), inf) << x;
  EXPECT_TRUE(std::isnan(ex2_fma(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_TRUE(std::isnan(ex2_fma(-std::numeric_limits<float>::quiet_NaN())));
}

} // namespace
} // namespace kiln
