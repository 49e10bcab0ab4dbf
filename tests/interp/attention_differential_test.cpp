// The differential suite on the CPU: random attention problems (attention_random_cases.h: shapes, dtypes,
// causal modes, layouts, GQA, the K variant, softmax scales, input ranges, tiles) through FA2's forward and
// its backward in the interpreter, each held to the double-precision reference with outputs poisoned first
// (check_attention_case, check_bwd_case; every fourth backward problem in the atomic-dQ variant). Problem i is the i-th draw of one seeded generator, so a failure reproduces by
// its index; the test's name also spells the problem.
#include "interp/attention_bwd_test_cases.h"
#include "interp/attention_random_cases.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <string>

using namespace kiln;
using namespace kiln::testing_support;

namespace {

constexpr uint64_t kSuiteSeed = 20261123;
constexpr int kProblems = 500;
constexpr int kBackwardProblems = 200;

std::vector<AttentionCase> differential_cases(uint64_t seed = kSuiteSeed, int count = kProblems) {
  std::mt19937_64 rng(seed);
  RandomAttentionLimits lim;
  lim.max_n = 300;
  lim.max_f32_exact_head_dim_tile = 128;
  std::vector<AttentionCase> cases;
  for (int i = 0; i < count; ++i)
    cases.push_back(random_attention_case(rng, random_attention_variant(rng, lim), lim));
  return cases;
}

class AttentionDifferential : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(AttentionDifferential, Fa2InterpretedMatchesTheDoubleReference) {
  const AttentionCase& c = GetParam();
  SCOPED_TRACE(c.problem.str() + (c.problem.sm_scale != 0 ? " sm_scale " + std::to_string(c.problem.sm_scale) : ""));
  Config config = default_fa2_config(c.problem);
  config.set("BLOCK_M", c.block_m).set("BLOCK_N", c.block_n);
  check_attention_case(c, run_fa2_interpreted, config);
}

INSTANTIATE_TEST_SUITE_P(random, AttentionDifferential, ::testing::ValuesIn(differential_cases()),
                         [](const auto& info) {
                           return "p" + std::to_string(info.index) + "_" + attention_case_name(info.param);
                         });

class AttentionBwdDifferential : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(AttentionBwdDifferential, Fa2BackwardInterpretedMatchesTheDoubleReference) {
  const AttentionCase& c = GetParam();
  SCOPED_TRACE(c.problem.str() + (c.problem.sm_scale != 0 ? " sm_scale " + std::to_string(c.problem.sm_scale) : ""));
  const bool atomic_dq = (c.problem.N_Q + c.problem.N_K) % 4 == 0; // about a quarter of the problems
  check_bwd_case(c, interp_bwd_configs(c, atomic_dq));
}

INSTANTIATE_TEST_SUITE_P(random, AttentionBwdDifferential,
                         ::testing::ValuesIn(differential_cases(kSuiteSeed + 1, kBackwardProblems)),
                         [](const auto& info) {
                           return "p" + std::to_string(info.index) + "_" + attention_case_name(info.param);
                         });

TEST(AttentionRandomCases, DrawsCoverEveryDimensionOfTheProblemSpace) {
  // The generator is only useful if it reaches every kind of problem: check that the suite's draws do.
  const std::vector<AttentionCase> cases = differential_cases();
  std::set<int> causal, dtypes;
  std::map<std::string, bool> seen; // a kind of problem -> whether some draw is of that kind
  for (const AttentionCase& c : cases) {
    const AttentionProblem& p = c.problem;
    causal.insert(p.causal);
    dtypes.insert(static_cast<int>(p.dtype));
    const std::pair<const char*, bool> kinds[] = {{"tf32", p.tf32},
                                                  {"exact f32", p.dtype == DType::f32 && !p.tf32},
                                                  {"GQA", p.H != p.H_KV},
                                                  {"bshd", p.bshd_layout},
                                                  {"bhsd", !p.bshd_layout},
                                                  {"K row-major", !p.k_transposed},
                                                  {"K transposed", p.k_transposed},
                                                  {"D < HEAD_DIM", p.D != p.head_dim_tile()},
                                                  {"sm_scale given", p.sm_scale != 0},
                                                  {"B > 1", p.B > 1},
                                                  {"N_Q < 4", p.N_Q < 4},
                                                  {"N_K < 4", p.N_K < 4},
                                                  {"inputs in +-30", c.input_scale >= 30},
                                                  {"N_Q != N_K", p.N_Q != p.N_K},
                                                  {"N_Q > 100", p.N_Q > 100}};
    for (auto [kind, is] : kinds)
      seen[kind] |= is;
    EXPECT_EQ(p.H % p.H_KV, 0) << attention_case_name(c);
    EXPECT_EQ(p.D % 8, 0) << attention_case_name(c);
    EXPECT_GE(p.head_dim_tile(), p.D) << attention_case_name(c);
  }
  EXPECT_EQ(causal.size(), 3u);
  EXPECT_EQ(dtypes.size(), 3u);
  for (const auto& [kind, is] : seen)
    EXPECT_TRUE(is) << "no problem of the suite has " << kind;
}

} // namespace
