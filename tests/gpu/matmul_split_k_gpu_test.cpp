// Split-K matmul on the GPU (kernels/matmul/matmul_split_k.h): the partial and reduce kernels at fixed configs
// (every tile of the split-K space, warp-specialised ones included, and a cp.async one), on shapes whose edges
// cut tiles in M, N and K and whose splits end mid-way or cover nothing, held to the double reference; then
// plan_matmul end to end on a K-deep shape, whichever path the tuner picks.
#include "gpu/gpu_skip.h"
#include "kernels/compare.h"
#include "kernels/matmul/matmul_launch.h"
#include "kernels/matmul/matmul_split_k.h"
#include "runtime/device.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <ostream>
#include <string>

using namespace kiln;

namespace {

struct SplitKGpuCase {
  int64_t M, N, K;
  DType dtype;
  int64_t bm, bn, split_k;
  int warps, stages;
  bool ws;
};

std::string label(const SplitKGpuCase& c) {
  return "M" + std::to_string(c.M) + "_N" + std::to_string(c.N) + "_K" + std::to_string(c.K) + "_" +
         std::string(dtype_name(c.dtype)) + "_bm" + std::to_string(c.bm) + "_bn" + std::to_string(c.bn) + "_split" +
         std::to_string(c.split_k) + "_w" + std::to_string(c.warps) + "_s" + std::to_string(c.stages) +
         (c.ws ? "_ws" : "");
}
void PrintTo(const SplitKGpuCase& c, std::ostream* os) { *os << label(c); }

class GpuMatmulSplitK : public ::testing::TestWithParam<SplitKGpuCase> {};

TEST_P(GpuMatmulSplitK, MatchesReference) {
  KILN_REQUIRE_GPU();
  const SplitKGpuCase& tc = GetParam();
  MatmulProblem p{tc.M, tc.N, tc.K, tc.dtype};
  Config partial = default_split_k_config(p);
  partial.set("BLOCK_M", tc.bm).set("BLOCK_N", tc.bn).set("SPLIT_K", tc.split_k);
  partial.set("WARP_SPECIALIZE", tc.ws ? 1 : 0);
  partial.num_warps = tc.warps;
  partial.num_stages = tc.stages;
  const Config reduce = default_split_k_reduce_config(p, tc.split_k);
  const MatmulInputs in = make_matmul_inputs(p, 5 + static_cast<uint64_t>(tc.K + tc.split_k), 1.0);
  std::vector<double> out = run_matmul_split_k_interpreted(p, partial, reduce, in, Executor::Gpu);
  Comparison cmp = compare_to_reference(out, matmul_reference(p, in));
  EXPECT_TRUE(cmp.ok(tolerance(p.dtype, false))) << cmp.str();
}

INSTANTIATE_TEST_SUITE_P(
    matmul_split_k, GpuMatmulSplitK,
    ::testing::Values(SplitKGpuCase{300, 200, 1000, f16, 128, 128, 2, 8, 4, true},  // 16 K tiles: 8 + 8, tails
                      SplitKGpuCase{300, 200, 1000, bf16, 128, 128, 3, 8, 4, true}, // 6 + 6 + 4
                      SplitKGpuCase{130, 260, 2050, f16, 128, 256, 4, 8, 4, true},  // K's tail in the last split
                      SplitKGpuCase{200, 130, 1100, f16, 128, 128, 3, 4, 5, true},
                      SplitKGpuCase{256, 256, 4096, f16, 128, 128, 4, 8, 4, false}, // cp.async, no producer
                      SplitKGpuCase{64, 64, 100, f16, 128, 128, 4, 8, 4, true}),    // 2 K tiles: 2 empty splits
    [](const ::testing::TestParamInfo<SplitKGpuCase>& info) { return label(info.param); });

// The tuned plan on a shape that leaves SMs idle (4 output tiles, K = 8192): correct whichever path it takes.
TEST(GpuMatmulPlan, KDeepShapeMatchesReference) {
  KILN_REQUIRE_GPU();
  const MatmulProblem p{256, 256, 8192, DType::f16};
  ASSERT_TRUE(split_k_worth_tuning(p, rt::current_device().sm_count));
  const MatmulInputs in = make_matmul_inputs(p, 77, 1.0);
  const rt::DeviceBuffer a = rt::DeviceBuffer::from_host(in.a.bytes), b = rt::DeviceBuffer::from_host(in.b.bytes);
  HostBuffer got(p.dtype, p.M * p.N, "C");
  rt::DeviceBuffer c(got.bytes.size());
  c.fill_bytes(0xFF); // NaN in f16
  KernelTuner tuner(rt::default_compile_cache(), rt::AutotunerOptions{});
  MatmulPlanOptions options;
  options.tune.mode = rt::AutotuneMode::Force;
  const MatmulPlan plan = plan_matmul(tuner, p, MatmulStrides::packed(p), {a.ptr(), b.ptr(), c.ptr()}, options);
  plan.launch();
  c.copy_to_host(got.bytes.data(), got.bytes.size());
  std::vector<double> out(static_cast<size_t>(got.numel()));
  for (int64_t i = 0; i < got.numel(); ++i)
    out[static_cast<size_t>(i)] = got.get(i);
  Comparison cmp = compare_to_reference(out, matmul_reference(p, in));
  EXPECT_TRUE(cmp.ok(tolerance(p.dtype, false))) << cmp.str() << " plan " << plan.str();
  std::printf("plan for 256x256x8192: %s\n", plan.str().c_str());
}

} // namespace
