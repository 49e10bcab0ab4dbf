// kiln's non-finite semantics (interp/attention_nonfinite_cases.h, docs/guarantees.md) in the generated code: FA2
// with GPU-sized tiles (its unmasked and masked key loops) and FA1, on NaN and ±inf in Q and K, NaN in V and
// scores overflowing f32. Skips without a driver.
#include "gpu/gpu_skip.h"
#include "interp/attention_nonfinite_cases.h"

using namespace kiln;
using namespace kiln::testing_support;

namespace {

class GpuAttentionNonFinite : public ::testing::TestWithParam<NonFiniteCase> {};

TEST_P(GpuAttentionNonFinite, Fa2FollowsTheSemantics) {
  KILN_REQUIRE_GPU();
  // 64 x 32 tiles: the 70 rows and keys cross unmasked tiles, the diagonal and the tail.
  auto config = [](const AttentionProblem& p) { return default_fa2_config(p).set("BLOCK_M", 64).set("BLOCK_N", 32); };
  check_nonfinite_case(GetParam(), run_fa2_interpreted, config, Executor::Gpu);
}

TEST_P(GpuAttentionNonFinite, Fa1FollowsTheSemantics) {
  KILN_REQUIRE_GPU();
  check_nonfinite_case(GetParam(), run_fa1_interpreted, default_fa1_config, Executor::Gpu);
}

INSTANTIATE_TEST_SUITE_P(cases, GpuAttentionNonFinite, ::testing::ValuesIn(nonfinite_cases()),
                         [](const auto& info) { return info.param.name; });

} // namespace
