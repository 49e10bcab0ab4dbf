// Dots below the tensor cores' 16 x 16 x 16 tile (M, N or K from 1 to 8), in every dtype dot takes, in the
// interpreter against a double-precision product of the same (rounded) inputs.
#include "small_dot_kernel.h"

#include "dsl/interpreter.h"
#include "kernels/compare.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

using namespace kiln;
using kiln_test::SmallDot;

namespace {

class SmallDotInterp : public ::testing::TestWithParam<SmallDot> {};

TEST_P(SmallDotInterp, MatchesDoubleProduct) {
  const SmallDot& d = GetParam();
  HostBuffer a(d.dtype, d.M * d.K, "a"), b(d.dtype, d.K * d.N, "b");
  HostBuffer c(d.dtype == DType::f64 ? DType::f64 : DType::f32, d.M * d.N, "c");
  std::mt19937_64 rng(static_cast<uint64_t>(d.M * 131 + d.N * 17 + d.K));
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  for (HostBuffer* x : {&a, &b})
    for (int64_t i = 0; i < x->numel(); ++i)
      x->set(i, dist(rng));
  interpret(kiln_test::small_dot_kernel(d), Grid{1, 1, 1}, {InterpArg::ptr(a), InterpArg::ptr(b), InterpArg::ptr(c)});
  std::vector<double> got, want;
  for (int64_t m = 0; m < d.M; ++m)
    for (int64_t n = 0; n < d.N; ++n) {
      double s = 0;
      for (int64_t k = 0; k < d.K; ++k)
        s += a.get(m * d.K + k) * b.get(k * d.N + n);
      want.push_back(s);
      got.push_back(c.get(m * d.N + n));
    }
  const Comparison cmp = compare_to_reference(got, want);
  EXPECT_TRUE(cmp.ok(d.dtype == DType::f64 ? 1e-12 : 1e-5)) << cmp.str();
}

INSTANTIATE_TEST_SUITE_P(small_dots, SmallDotInterp,
                         ::testing::Values(SmallDot{4, 4, 8, DType::f32}, SmallDot{1, 1, 32, DType::f32},
                                           SmallDot{16, 2, 16, DType::f32}, SmallDot{8, 8, 16, DType::f16},
                                           SmallDot{8, 32, 4, DType::bf16}, SmallDot{2, 16, 4, DType::f64},
                                           SmallDot{32, 32, 1, DType::f32}),
                         [](const ::testing::TestParamInfo<SmallDot>& info) { return kiln_test::label(info.param); });

} // namespace
