// Random packed problems through the interpreter, forward and backward, against the per-sequence double
// reference: 24 batches of 1 to 6 sequences with lengths from 0 to 300 drawn apart for queries and keys (one
// in five empty), causal modes, GQA groups, head dims, dtypes, K variants, padded token strides and tiles all
// drawn from a fixed seed, so that every run checks the same problems and a failure names its index.
#include "attention_varlen_bwd_cases.h"

using namespace kiln;
using namespace kiln::testing_support;

namespace {

class Fa2VarlenRandom : public ::testing::TestWithParam<int> {};

TEST_P(Fa2VarlenRandom, ForwardAndBackwardMatchTheReference) {
  const VarlenCase c = random_varlen_case(GetParam());
  SCOPED_TRACE(c.problem.str() + " tiles " + std::to_string(c.block_m) + "x" + std::to_string(c.block_n));
  check_varlen_case(
      c,
      [](const VarlenProblem& p, const Config& cfg, const AttentionInputs& in, Executor e) {
        return run_fa2_varlen_interpreted(p, cfg, in, e);
      },
      varlen_case_config(c));
  check_varlen_bwd_case(c, varlen_bwd_case_configs(c, GetParam() % 2 == 1));
}

INSTANTIATE_TEST_SUITE_P(varlen, Fa2VarlenRandom, ::testing::Range(0, 24));

} // namespace
