// The attention backward over a block mask (fa2_bwd_block_mask.h) on a GPU: for every block-mask case, the
// classifier through the JIT (both orientations, checked tile by tile against the dense mask), then dQ, dK, dV
// of the backward over the lists against the double-precision gradients with the same mods, as the interpreter
// tests do. (Through the host API, make_block_mask then forward() and backward(): attention_bwd_api_gpu_test.cpp.)
// Skips without a driver.
#include "gpu/gpu_skip.h"
#include "interp/attention_block_mask_cases.h"
#include "interp/attention_mods_bwd_cases.h"

#include <gtest/gtest.h>

using namespace kiln;
using namespace kiln::testing_support;

namespace {

class GpuBlockMaskBwd : public ::testing::TestWithParam<ModCase> {};

TEST_P(GpuBlockMaskBwd, GradientsOverTheBlockMaskMatchTheReference) {
  KILN_REQUIRE_GPU();
  const ModCase& c = GetParam();
  const AttentionProblem& p = c.base.problem;
  const HostBlockMask bm = make_host_block_mask(p, c.mods, c.tensors, c.base.block_m, c.base.block_n, Executor::Gpu);
  expect_block_mask_matches_dense_mask(bm, p, c.mods, c.tensors, c.name);
  check_mod_bwd_case(c, block_mask_bwd_configs(bm.layout, p), Executor::Gpu, &bm);
}

INSTANTIATE_TEST_SUITE_P(block_mask_bwd, GpuBlockMaskBwd, ::testing::ValuesIn(block_mask_cases()),
                         [](const auto& info) { return info.param.name; });

} // namespace
