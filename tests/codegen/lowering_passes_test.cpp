// Properties of the lowering plan that the passes fill (codegen/lowering_plan.h), checked on the plan itself
// rather than on the generated text: which instruction each dot became, which casts are fused, which loops
// keep a product in flight, which loads a later loop waits for, and how sibling loops share shared memory.
#include "planned_kernel.h"

#include <gtest/gtest.h>

#include <set>

using namespace kiln;
using kiln_test::ops_of;
using kiln_test::plan_for;
using kiln_test::Planned;

namespace {

TEST(LoweringPasses, Fa2DotsAreWgmmaOnHopperAndMmaSyncOnAmpere) {
  for (const char* arch : {"sm_90a", "sm_80"}) {
    Planned p = plan_for("fa2_fwd", {}, arch);
    const std::vector<const Op*> dots = ops_of(p.kernel, OpKind::Dot);
    ASSERT_EQ(dots.size(), 4u);
    for (const Op* d : dots)
      EXPECT_EQ(p.plan.dots.at(d).instruction,
                std::string(arch) == "sm_90a" ? DotInstruction::Wgmma : DotInstruction::MmaSync)
          << arch;
    // P V reads P straight from the f32 scores: its f16 cast is fused into the A fragments.
    EXPECT_TRUE(p.plan.fused_casts.count(dots[1]->operands[0])) << arch;
    EXPECT_FALSE(p.plan.fused_casts.count(dots[0]->operands[0])) << "Q Kᵀ reads shared tiles";
  }
  // With wgmma switched off on sm_90a, mma.sync; exact f32 products run on FMA.
  CodegenOptions no_wgmma;
  no_wgmma.wgmma = false;
  Planned off = plan_for("fa2_fwd", {}, "sm_90a", no_wgmma);
  EXPECT_EQ(off.plan.dots.at(ops_of(off.kernel, OpKind::Dot)[0]).instruction, DotInstruction::MmaSync);
  Planned f32 = plan_for("fa2_fwd", {{"DTYPE", 2}, {"BLOCK_N", 32}}, "sm_90a");
  EXPECT_EQ(f32.plan.dots.at(ops_of(f32.kernel, OpKind::Dot)[0]).instruction, DotInstruction::Fma);
}

TEST(LoweringPasses, MatmulKeepsOneProductInFlightAndIssuesOneStageLessAhead) {
  Planned p = plan_for("matmul", {}, "sm_90a");
  const std::vector<const Op*> loops = ops_of(p.kernel, OpKind::For);
  ASSERT_EQ(loops.size(), 1u);
  ASSERT_TRUE(p.plan.deferred_dots.count(loops[0]));
  EXPECT_TRUE(p.plan.is_deferred_dot(*ops_of(p.kernel, OpKind::Dot)[0]));
  const int stages = p.kernel.config.num_stages;
  EXPECT_EQ(p.plan.lookahead(loops[0], stages), stages - 2);
  Planned ampere = plan_for("matmul", {}, "sm_80"); // mma.sync products complete in the instruction
  EXPECT_TRUE(ampere.plan.deferred_dots.empty());
  EXPECT_EQ(ampere.plan.lookahead(ops_of(ampere.kernel, OpKind::For)[0], stages), stages - 1);
}

TEST(LoweringPasses, Fa2sQTileIsWaitedForByTheKeyLoop) {
  Planned p = plan_for("fa2_fwd", {}, "sm_90a");
  const Op* q_load = ops_of(p.kernel, OpKind::LoadBlock).front();
  EXPECT_TRUE(p.plan.unwaited_loads.count(q_load));
  EXPECT_EQ(p.plan.unwaited_loads.size(), 1u);
}

TEST(LoweringPasses, SiblingLoopsNestedInOneLoopShareSharedMemory) {
  // dK/dV: K and V resident for the program; Q and dO rings in each of the three query loops, which sit
  // side by side inside the loop over the group's query heads.
  Planned p = plan_for("fa2_bwd_dkdv", {{"BLOCK_N", 64}, {"BLOCK_M", 64}, {"CAUSAL", 1}}, "sm_90a");
  ASSERT_EQ(p.plan.tiles.size(), 8u);
  std::set<int64_t> resident, streamed;
  for (const SharedTile& t : p.plan.tiles)
    (t.loop() ? streamed : resident).insert(t.offset);
  EXPECT_EQ(resident.size(), 2u) << "K and V apart";
  EXPECT_EQ(streamed.size(), 2u) << "each query loop's Q and dO rings at the same two offsets";
  for (int64_t off : streamed)
    EXPECT_GE(off, *resident.rbegin() + 8192) << "the rings clear of K and V";
  EXPECT_EQ(p.plan.tiles_bytes, 49152);
}

} // namespace
