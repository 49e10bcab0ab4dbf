// A pipelined loop inside a loop over a group's heads (tests/head_group_kernel.h), the pattern of dK/dV's query
// loops: its tiles are copied by TMA on sm_90a only where the kernel caps the head, min(head0 + g, H), and then
// through a map whose head dim is H + 1 long, read at launch (codegen/block_base.h, OuterDim::extent_param).
// Without the cap the loop stays on cp.async, and the plan says how to reach TMA. Both compile with NVRTC.
#include "head_group_kernel.h"

#include "codegen/codegen.h"
#include "nvrtc_compile.h"

#include <gtest/gtest.h>

using namespace kiln;

namespace {

TEST(HeadGroupCap, ACappedHeadIsCopiedByTmaThroughAMapThatTakesItsLengthFromH) {
  const Kernel k = kiln_test::head_group_kernel(/*capped=*/true);
  const GeneratedKernel g = generate_cuda(k, Target::parse("sm_90a"));
  ASSERT_EQ(g.tensor_maps.size(), 1u) << g.lowered;
  const TensorMapParam& m = g.tensor_maps[0];
  EXPECT_EQ(m.base_param, 0); // x
  ASSERT_EQ(m.outer.size(), 1u);
  EXPECT_EQ(m.outer[0].extent_param, 3); // H
  EXPECT_EQ(m.outer[0].extent, 0);
  EXPECT_EQ(m.outer[0].nonneg_params, (std::vector<int>{3, 4})); // H (the cap) and group (head0 = pid * group)
  kiln_test::expect_nvrtc_compiles(g, "sm_90a");
}

TEST(HeadGroupCap, AnUncappedHeadStaysOnCpAsyncAndThePlanSaysHowToCapIt) {
  const GeneratedKernel g = generate_cuda(kiln_test::head_group_kernel(/*capped=*/false), Target::parse("sm_90a"));
  EXPECT_TRUE(g.tensor_maps.empty());
  EXPECT_NE(g.lowered.find("writing min(x, P) caps it"), std::string::npos) << g.lowered;
  kiln_test::expect_nvrtc_compiles(g, "sm_90a");
}

} // namespace
