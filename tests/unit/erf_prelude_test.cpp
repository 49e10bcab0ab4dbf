// The branch-free erf of the device prelude (codegen/prelude/kiln_erf.cuh), compiled here as host C++ with an
// exact 2^x: its error over the f32 line against double erf, and its special values. On the GPU, ex2.approx
// moves a result by at most one f32 step (tests/gpu/erf_gpu_test.cpp runs the same text on the device).
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>

#define KILN_ERF_FN inline
#define KILN_ERF_EX2(x) std::exp2(x)
#include "codegen/prelude/kiln_erf.cuh"

namespace kiln {
namespace {

float from_bits(uint32_t b) {
  float f;
  std::memcpy(&f, &b, sizeof f);
  return f;
}

// |got - erf(x)| in units of the last place of erf(x) rounded to f32 (the ulp below 1 where it rounds to 1).
double ulp_error(float x, float got) {
  const double want = std::erf(static_cast<double>(x));
  const float wf = static_cast<float>(want);
  const double ulp = std::fabs(wf) == 1.0f ? 0x1p-24 : std::nextafter(std::fabs(wf), INFINITY) - std::fabs(wf);
  return std::fabs(static_cast<double>(got) - want) / ulp;
}

TEST(ErfPrelude, WithinOnePointThreeUlpAcrossTheF32Line) {
  // Every 37th f32 from the smallest subnormal to 4.5 (past it erf is 1 in f32), both signs: 58 million values,
  // both pieces and the seam at 0.9 densely. The worst, 1.26 ulp, lies just past the seam, where 1 - 2^Q
  // is largest.
  double worst = 0;
  float worst_x = 0;
  int64_t checked = 0;
  for (uint32_t bits = 1; from_bits(bits) <= 4.5f; bits += 37) {
    for (float x : {from_bits(bits), -from_bits(bits)}) {
      const double e = ulp_error(x, erf_f32(x));
      ++checked;
      if (e > worst) {
        worst = e;
        worst_x = x;
      }
    }
  }
  EXPECT_LE(worst, 1.3) << "worst at x = " << worst_x << " after " << checked << " values";
  EXPECT_GT(checked, 20'000'000);
}

TEST(ErfPrelude, TheSeamAndTheClampAreContinuous) {
  for (float x : {0.9f, std::nextafter(0.9f, 0.0f), 3.9f, 4.0f, std::nextafter(4.0f, 5.0f), 5.0f, 100.0f, 3e38f})
    EXPECT_LE(ulp_error(x, erf_f32(x)), 1.3) << "x = " << x;
}

TEST(ErfPrelude, SpecialValues) {
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_TRUE(std::isnan(erf_f32(std::numeric_limits<float>::quiet_NaN())));
  EXPECT_EQ(erf_f32(inf), 1.0f);
  EXPECT_EQ(erf_f32(-inf), -1.0f);
  EXPECT_EQ(erf_f32(0.0f), 0.0f);
  EXPECT_TRUE(std::signbit(erf_f32(-0.0f))) << "erf(-0) is -0";
  EXPECT_EQ(erf_f32(-2.5f), -erf_f32(2.5f)) << "odd";
  EXPECT_EQ(erf_f32(-0.5f), -erf_f32(0.5f)) << "odd";
}

} // namespace
} // namespace kiln
