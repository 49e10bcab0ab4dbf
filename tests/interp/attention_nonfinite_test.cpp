// kiln's non-finite semantics (attention_nonfinite_cases.h, attention_nonfinite_value_cases.h,
// docs/guarantees.md) in the interpreter: FA2 with its two-stage key loop, FA2 masking every tile, and FA1, on
// NaN and ±inf in Q, K and V, and scores overflowing f32.
#include "interp/attention_nonfinite_cases.h"
#include "interp/attention_nonfinite_value_cases.h"

using namespace kiln;
using namespace kiln::testing_support;

namespace {

class AttentionNonFinite : public ::testing::TestWithParam<NonFiniteCase> {};

Config fa2_small_tiles(const AttentionProblem& p) {
  Config c = default_fa2_config(p);
  c.set("BLOCK_M", 32).set("BLOCK_N", 16);
  return c;
}

TEST_P(AttentionNonFinite, Fa2FollowsTheSemantics) {
  check_nonfinite_case(GetParam(), run_fa2_interpreted, fa2_small_tiles, Executor::Interpreter);
}

TEST_P(AttentionNonFinite, Fa2MaskingEveryTileFollowsTheSemantics) {
  auto config = [](const AttentionProblem& p) { return fa2_small_tiles(p).set("MASK_EVERY_TILE", 1); };
  check_nonfinite_case(GetParam(), run_fa2_interpreted, config, Executor::Interpreter);
}

TEST_P(AttentionNonFinite, Fa1FollowsTheSemantics) {
  auto config = [](const AttentionProblem& p) { return default_fa1_config(p).set("BLOCK_M", 32).set("BLOCK_N", 16); };
  check_nonfinite_case(GetParam(), run_fa1_interpreted, config, Executor::Interpreter);
}

INSTANTIATE_TEST_SUITE_P(cases, AttentionNonFinite, ::testing::ValuesIn(nonfinite_cases()),
                         [](const auto& info) { return info.param.name; });

// NaN and ±inf in V, in keys hidden from some rows inside the key tiles their programs visit: those rows stay
// finite (selection, not 0 · NaN), the rows that see the keys get them.
class AttentionNonFiniteValues : public ::testing::TestWithParam<NonFiniteValueCase> {};

TEST_P(AttentionNonFiniteValues, Fa2SelectsTheKeysARowSees) {
  check_nonfinite_value_case(GetParam(), run_fa2_interpreted, fa2_small_tiles, Executor::Interpreter);
}

TEST_P(AttentionNonFiniteValues, Fa2MaskingEveryTileSelectsTheKeysARowSees) {
  auto config = [](const AttentionProblem& p) { return fa2_small_tiles(p).set("MASK_EVERY_TILE", 1); };
  check_nonfinite_value_case(GetParam(), run_fa2_interpreted, config, Executor::Interpreter);
}

TEST_P(AttentionNonFiniteValues, Fa1SelectsTheKeysARowSees) {
  auto config = [](const AttentionProblem& p) { return default_fa1_config(p).set("BLOCK_M", 32).set("BLOCK_N", 16); };
  check_nonfinite_value_case(GetParam(), run_fa1_interpreted, config, Executor::Interpreter);
}

INSTANTIATE_TEST_SUITE_P(cases, AttentionNonFiniteValues, ::testing::ValuesIn(nonfinite_value_cases()),
                         [](const auto& info) { return info.param.name; });

} // namespace
