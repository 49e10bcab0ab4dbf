// How the warps share each dot's tile (assign_layouts: LoweringPlan::warps and dot_warps): one split for the
// kernel, and a split of its own for a dot with fewer rows than that split spreads over.
#include "codegen/codegen.h"
#include "codegen/layout.h"
#include "tests/codegen/planned_kernel.h"

#include <gtest/gtest.h>

namespace kiln_test {
namespace {

// The fused backward's dK/dV over two warpgroups: 128 keys, steps of 64 query rows, dQ added by the kernel.
const std::map<std::string, int64_t> kFusedDkdv = {{"HEAD_DIM", 128}, {"BLOCK_N", 128},     {"BLOCK_M", 64},
                                                   {"ATOMIC_DQ", 1},  {"WARP_SPECIALIZE", 1}, {"num_warps", 8}};

int64_t rows(const Kernel& k, const Op& dot) { return k.type(dot.result()).shape[0]; }

TEST(DotWarpSplits, AShortDotTakesItsOwnSplitAndTheKeyProductsKeepTheirWarpgroupsAlongM) {
  Planned p = plan_for("fa2_bwd_dkdv", kFusedDkdv, "sm_90a");
  EXPECT_EQ(p.plan.warps.warps_m, 8);
  EXPECT_EQ(p.plan.warps.warps_n, 1);
  const std::vector<const Op*> dots = ops_of(p.kernel, OpKind::Dot);
  ASSERT_EQ(dots.size(), 15u) << "five products a step, three query loops";
  int own = 0;
  for (const Op* d : dots) {
    SCOPED_TRACE(d->loc.str());
    EXPECT_EQ(p.plan.dots.at(d).instruction, DotInstruction::Wgmma) << p.plan.dots.at(d).why_not_wgmma;
    const WarpSplit& w = p.plan.warps_of(*d);
    EXPECT_EQ(w.warps_m * w.warps_n, 8) << "no replicas: every warp holds a distinct part";
    if (rows(p.kernel, *d) == 64) { // dQ = dS K: 64 query rows, one warpgroup's worth, half the columns each
      ++own;
      EXPECT_EQ(w.warps_m, 4);
      EXPECT_EQ(w.warps_n, 2);
      // Its accumulator is that split's layout, not the kernel's.
      const Shape& c = p.kernel.type(d->result()).shape;
      EXPECT_TRUE(p.plan.layout.at(d->result()).same_bases(mma_acc_layout(c[0], c[1], w)));
    } else {
      EXPECT_EQ(p.plan.dot_warps.count(d), 0u);
    }
  }
  EXPECT_EQ(own, 3);
}

TEST(DotWarpSplits, DotsOfOneHeightShareTheKernelsSplit) {
  for (const auto& [name, overrides] :
       std::vector<std::pair<std::string, std::map<std::string, int64_t>>>{
           {"fa2_bwd_dkdv", {{"BLOCK_N", 128}, {"BLOCK_M", 64}, {"WARP_SPECIALIZE", 1}, {"num_warps", 8}}},
           {"fa2_fwd", {{"BLOCK_M", 128}, {"BLOCK_N", 128}, {"num_warps", 8}}},
           {"fa2_bwd_dq", {{"BLOCK_M", 64}, {"BLOCK_N", 64}}}}) {
    SCOPED_TRACE(name);
    Planned p = plan_for(name, overrides, "sm_90a");
    EXPECT_TRUE(p.plan.dot_warps.empty());
  }
}

// mma.sync reads each warp's fragments itself: there the two-by-four split of the tall products costs less than
// warps stacked along M, so every dot keeps the one split and none needs its own.
TEST(DotWarpSplits, OnMmaSyncTheFusedDkdvKeepsOneSplit) {
  Planned p = plan_for("fa2_bwd_dkdv", kFusedDkdv, "sm_80");
  EXPECT_TRUE(p.plan.dot_warps.empty());
  EXPECT_EQ(p.plan.warps.warps_m * p.plan.warps.warps_n, 8);
}

// `--stage lowered` says which dots have a split of their own.
TEST(DotWarpSplits, TheLoweredStageNamesTheShortDotsSplit) {
  const KernelDef& def = builtin_kernels().find("fa2_bwd_dkdv");
  const GeneratedKernel g = generate_cuda(def.build(def.with_overrides(def.default_config(), kFusedDkdv)),
                                          Target::parse("sm_90a"));
  EXPECT_NE(g.lowered.find("(mma warps 8x1)"), std::string::npos) << g.lowered;
  EXPECT_NE(g.lowered.find("over 4x2 warps of its own"), std::string::npos) << g.lowered;
}

} // namespace
} // namespace kiln_test
