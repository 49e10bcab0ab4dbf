// Dots below the tensor cores' tile (FMA, codegen/choose_dot_lowering.h) on the GPU against the interpreter, in
// every dtype, alone and beside a tensor-core dot in the same kernel.
#include "small_dot_kernel.h"

#include "dsl/interpreter.h"
#include "gpu/gpu_skip.h"
#include "jit/jit_kernel.h"
#include "kernels/compare.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

using namespace kiln;
using kiln_test::SmallDot;

namespace {

void fill(HostBuffer& b, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  for (int64_t i = 0; i < b.numel(); ++i)
    b.set(i, dist(rng));
}

std::vector<double> values(const HostBuffer& b) {
  std::vector<double> v(static_cast<size_t>(b.numel()));
  for (int64_t i = 0; i < b.numel(); ++i)
    v[static_cast<size_t>(i)] = b.get(i);
  return v;
}

class GpuSmallDot : public ::testing::TestWithParam<SmallDot> {};

TEST_P(GpuSmallDot, MatchesInterpreterAloneAndBesideAnMmaDot) {
  KILN_REQUIRE_GPU();
  const SmallDot& d = GetParam();
  const DType out_t = d.dtype == DType::f64 ? DType::f64 : DType::f32;
  HostBuffer a(d.dtype, d.M * d.K, "a"), b(d.dtype, d.K * d.N, "b"), c(out_t, d.M * d.N, "c");
  HostBuffer x(DType::f16, 64 * 32, "x"), y(DType::f16, 32 * 64, "y"), z(DType::f32, 64 * 64, "z");
  fill(a, 1), fill(b, 2), fill(x, 3), fill(y, 4);
  for (bool beside : {false, true}) {
    const Kernel k = kiln_test::small_dot_kernel(d, beside);
    HostBuffer ci = c, zi = z, cg = c, zg = z;
    std::vector<InterpArg> interp_args = {InterpArg::ptr(a), InterpArg::ptr(b), InterpArg::ptr(ci)};
    std::vector<InterpArg> gpu_args = {InterpArg::ptr(a), InterpArg::ptr(b), InterpArg::ptr(cg)};
    if (beside) {
      interp_args.insert(interp_args.end(), {InterpArg::ptr(x), InterpArg::ptr(y), InterpArg::ptr(zi)});
      gpu_args.insert(gpu_args.end(), {InterpArg::ptr(x), InterpArg::ptr(y), InterpArg::ptr(zg)});
    }
    interpret(k, Grid{1, 1, 1}, interp_args);
    run_on_gpu(*JitKernel::compile(k), Grid{1, 1, 1}, gpu_args);
    const Comparison cmp = compare_to_reference(values(cg), values(ci));
    EXPECT_TRUE(cmp.ok(d.dtype == DType::f64 ? 1e-12 : 1e-5)) << (beside ? "beside an mma dot: " : "") << cmp.str();
    if (beside) {
      const Comparison big = compare_to_reference(values(zg), values(zi));
      EXPECT_TRUE(big.ok(1e-3)) << "the mma dot: " << big.str();
    }
  }
}

INSTANTIATE_TEST_SUITE_P(small_dots, GpuSmallDot,
                         ::testing::Values(SmallDot{4, 4, 8, DType::f32}, SmallDot{1, 1, 32, DType::f32},
                                           SmallDot{8, 8, 16, DType::f16}, SmallDot{8, 32, 4, DType::bf16},
                                           SmallDot{2, 16, 4, DType::f64}, SmallDot{32, 32, 1, DType::f32}),
                         [](const ::testing::TestParamInfo<SmallDot>& info) { return kiln_test::label(info.param); });

} // namespace
