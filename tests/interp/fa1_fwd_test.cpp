// FlashAttention-1 forward (Algorithm 1) in the interpreter over the shared attention sweep
// (attention_test_cases.h): the same answers as the reference, from a different loop order.
#include "attention_test_cases.h"

#include "kernels/attention/fa1_fwd.h"

using namespace kiln;
using namespace kiln::testing_support;

namespace {

class Fa1Interp : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(Fa1Interp, MatchesReference) {
  const AttentionCase& c = GetParam();
  Config config = default_fa1_config(c.problem);
  config.set("BLOCK_M", c.block_m).set("BLOCK_N", c.block_n);
  check_attention_case(c, run_fa1_interpreted, config);
}

INSTANTIATE_TEST_SUITE_P(fa1, Fa1Interp, ::testing::ValuesIn(attention_sweep()),
                         [](const auto& info) { return attention_case_name(info.param); });

TEST(Fa1Kernel, GridIsOneProgramPerBatchHead) {
  AttentionProblem p;
  p.B = 3;
  p.H = 4;
  p.H_KV = 2;
  Config c = default_fa1_config(p);
  EXPECT_EQ(fa1_fwd_def().grid(c, attention_size_args(p)), (Grid{12, 1, 1}));
}

} // namespace
