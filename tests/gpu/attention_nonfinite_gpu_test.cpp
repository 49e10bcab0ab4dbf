// kiln's non-finite semantics (interp/attention_nonfinite_cases.h, interp/attention_nonfinite_value_cases.h,
// docs/guarantees.md) in the generated code: FA2 with GPU-sized tiles (its unmasked and masked key loops, and
// masking every tile, every exponential on the FMA pipe) and FA1, on NaN and ±inf in Q and K, NaN in V and scores overflowing f32; and, with
// EXACT_MASKED_V=1, NaN and ±inf in V inside the key tiles of rows that do not see them. Skips without a driver.
#include "gpu/gpu_skip.h"
#include "interp/attention_nonfinite_cases.h"
#include "interp/attention_nonfinite_value_cases.h"

using namespace kiln;
using namespace kiln::testing_support;

namespace {

class GpuAttentionNonFinite : public ::testing::TestWithParam<NonFiniteCase> {};

// 64 x 32 tiles: the 70 rows and keys cross unmasked tiles, the diagonal and the tail.
Config fa2_gpu_tiles(const AttentionProblem& p) { return default_fa2_config(p).set("BLOCK_M", 64).set("BLOCK_N", 32); }

TEST_P(GpuAttentionNonFinite, Fa2FollowsTheSemantics) {
  KILN_REQUIRE_GPU();
  check_nonfinite_case(GetParam(), run_fa2_interpreted, fa2_gpu_tiles, Executor::Gpu);
}

TEST_P(GpuAttentionNonFinite, Fa2MaskingEveryTileFollowsTheSemantics) {
  KILN_REQUIRE_GPU();
  if (GetParam().needs_hidden_tiles_skipped)
    GTEST_SKIP() << "MASK_EVERY_TILE=1 visits key tiles a row sees none of, where a NaN in V reaches the row "
                    "(0 * NaN) unless EXACT_MASKED_V=1 (GpuAttentionNonFiniteValues)";
  auto config = [](const AttentionProblem& p) { return fa2_gpu_tiles(p).set("MASK_EVERY_TILE", 1); };
  check_nonfinite_case(GetParam(), run_fa2_interpreted, config, Executor::Gpu);
}

// Every exponential by the FMA pipe's polynomial (EXP2_ON_FMA=1, codegen/prelude/kiln_ex2_fma.cuh): NaN, ±inf and
// masked (-inf) scores give what ex2.approx gives.
TEST_P(GpuAttentionNonFinite, Fa2WithExp2OnTheFmaPipeFollowsTheSemantics) {
  KILN_REQUIRE_GPU();
  auto config = [](const AttentionProblem& p) { return fa2_gpu_tiles(p).set("EXP2_ON_FMA", 1); };
  check_nonfinite_case(GetParam(), run_fa2_interpreted, config, Executor::Gpu);
}

TEST_P(GpuAttentionNonFinite, Fa1FollowsTheSemantics) {
  KILN_REQUIRE_GPU();
  check_nonfinite_case(GetParam(), run_fa1_interpreted, default_fa1_config, Executor::Gpu);
}

INSTANTIATE_TEST_SUITE_P(cases, GpuAttentionNonFinite, ::testing::ValuesIn(nonfinite_cases()),
                         [](const auto& info) { return info.param.name; });

// EXACT_MASKED_V=1: NaN and ±inf in V inside the key tiles visited by rows that do not see them: selected away on
// the tensor cores
// too (the 64 x 32 tiles put key 30 in the masked 0..31 tile of the 0..63 Q tile), at the default tiles as well.
class GpuAttentionNonFiniteValues : public ::testing::TestWithParam<NonFiniteValueCase> {};

TEST_P(GpuAttentionNonFiniteValues, Fa2SelectsTheKeysARowSees) {
  KILN_REQUIRE_GPU();
  check_nonfinite_value_case(GetParam(), run_fa2_interpreted, fa2_gpu_tiles, Executor::Gpu);
}

TEST_P(GpuAttentionNonFiniteValues, Fa2DefaultTilesSelectTheKeysARowSees) {
  KILN_REQUIRE_GPU();
  check_nonfinite_value_case(GetParam(), run_fa2_interpreted, default_fa2_config, Executor::Gpu);
}

TEST_P(GpuAttentionNonFiniteValues, Fa2MaskingEveryTileSelectsTheKeysARowSees) {
  KILN_REQUIRE_GPU();
  auto config = [](const AttentionProblem& p) { return fa2_gpu_tiles(p).set("MASK_EVERY_TILE", 1); };
  check_nonfinite_value_case(GetParam(), run_fa2_interpreted, config, Executor::Gpu);
}

TEST_P(GpuAttentionNonFiniteValues, Fa1SelectsTheKeysARowSees) {
  KILN_REQUIRE_GPU();
  check_nonfinite_value_case(GetParam(), run_fa1_interpreted, default_fa1_config, Executor::Gpu);
}

INSTANTIATE_TEST_SUITE_P(cases, GpuAttentionNonFiniteValues, ::testing::ValuesIn(nonfinite_value_cases()),
                         [](const auto& info) { return info.param.name; });

} // namespace
