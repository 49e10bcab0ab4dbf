// The rule backward() and backward_varlen() share for their two variants (kernels/attention/attention_bwd_steps.h):
// when the atomic-dQ pair may run (and so the workspace holds its accumulator), when the tuner's times choose,
// and which pair the times pick.
#include "kernels/attention/attention_bwd_steps.h"

#include <gtest/gtest.h>

using namespace kiln;
using namespace kiln::attention;
using namespace kiln::attention::detail;

namespace {

TEST(AttentionBwdSteps, TheAtomicPairMayRunWhereTheOptionsAllowIt) {
  BackwardOptions o; // deterministic by default
  EXPECT_FALSE(may_accumulate_dq(o));
  EXPECT_FALSE(chooses_variant(o));
  o.deterministic = false;
  EXPECT_TRUE(may_accumulate_dq(o));
  EXPECT_TRUE(chooses_variant(o));
  o.dq_config = Config{}; // a dQ kernel's config: the deterministic pair
  EXPECT_FALSE(may_accumulate_dq(o));
  EXPECT_FALSE(chooses_variant(o));
  o.dq_config.reset();
  o.config = Config{};
  EXPECT_FALSE(may_accumulate_dq(o)); // a dK/dV config without ATOMIC_DQ=1
  EXPECT_FALSE(chooses_variant(o));
  o.config->set("ATOMIC_DQ", 1);
  EXPECT_TRUE(may_accumulate_dq(o));
  EXPECT_FALSE(chooses_variant(o)); // given, not chosen
}

TEST(AttentionBwdSteps, TheAtomicPairOnlyWhenTimedFaster) {
  // {preprocess, dK/dV, dQ kernel or convert}, deterministic way first.
  EXPECT_TRUE(atomic_pair_is_faster({0.1, 3.0, 1.0}, {0.1, 3.5, 0.2}));   // 3.8 < 4.1
  EXPECT_FALSE(atomic_pair_is_faster({0.1, 3.0, 1.0}, {0.1, 3.9, 0.2}));  // 4.2 > 4.1
  EXPECT_FALSE(atomic_pair_is_faster({0.1, 3.0, 1.0}, {0.1, 3.75, 0.25})); // a tie keeps the deterministic pair
  // The atomic way's preprocess also zeroes the dQ accumulator: a pair faster by its two kernels alone
  // (3.7 < 4.0) loses once that write is counted (0.45 + 3.7 > 0.1 + 4.0).
  EXPECT_FALSE(atomic_pair_is_faster({0.1, 3.0, 1.0}, {0.45, 3.5, 0.2}));
  EXPECT_TRUE(atomic_pair_is_faster({0.1, 3.0, 1.0}, {0.35, 3.5, 0.2}));
  EXPECT_TRUE(atomic_pair_is_faster({0.1, 0.0, 1.0}, {0.1, 0.0, 0.2})); // no keys: no dK/dV in either pair
  // Any kernel without a time (KILN_AUTOTUNE=off, or cached with nothing remembered): the deterministic pair.
  EXPECT_FALSE(atomic_pair_is_faster({0.1, std::nullopt, 1.0}, {0.1, 1.0, 0.1}));
  EXPECT_FALSE(atomic_pair_is_faster({0.1, 3.0, 1.0}, {0.1, std::nullopt, 0.1}));
  EXPECT_FALSE(atomic_pair_is_faster({0.1, 3.0, 1.0}, {0.1, 1.0, std::nullopt}));
  EXPECT_FALSE(atomic_pair_is_faster({std::nullopt, 3.0, 1.0}, {0.1, 1.0, 0.1}));
  EXPECT_FALSE(atomic_pair_is_faster({0.1, 3.0, 1.0}, {std::nullopt, 1.0, 0.1}));
}

} // namespace
