// plan_tma_stores (codegen/plan_tma_stores.h): which finished tiles a warp-specialised kernel stores by TMA, the
// tensor maps they take (as data), the stage's place in shared memory and its waits, the reason a store stays on
// the register path, and that the kernels that take the path compile without spilling.
#include "codegen/codegen.h"
#include "codegen/planned_kernel.h"
#include "source_text.h"
#include "nvrtc_compile.h"

#include <gtest/gtest.h>

namespace kiln_test {
namespace {

const std::map<std::string, int64_t> kLatePersistentD128 = {
    {"BLOCK_M", 128},          {"BLOCK_N", 128},  {"HEAD_DIM", 128},      {"WARP_SPECIALIZE", 1},
    {"LAST_PRODUCT_LATE", 1},  {"LAZY_RESCALE", 1}, {"PERSISTENT", 1},    {"TILE_BARRIERS", 1},
    {"num_warps", 8},          {"num_stages", 2}};

// FA2's O on its persistent late tile: one map over O and its batch and head terms, boxes of 128 rows x 64 columns
// (two 128-byte panels), written by stmatrix into a stage after everything else, each program waiting for the
// previous program's store to have read it; the register path's lane exchanges are not planned.
TEST(TmaStores, Fa2OutputOnTheWarpSpecialisedTileGoesOutByTma) {
  Planned p = plan_for("fa2_fwd", kLatePersistentD128, "sm_90a");
  const TmaStores& s = p.plan.tma_stores;
  const std::vector<const Op*> stores = ops_of(p.kernel, OpKind::StoreBlock);
  ASSERT_EQ(stores.size(), 1u);
  ASSERT_EQ(s.ops.size(), 1u);
  const TmaStore& t = s.ops.at(stores[0]);
  EXPECT_EQ(t.rows, 128);
  EXPECT_EQ(t.cols, 128);
  EXPECT_EQ(t.panels, 2);
  EXPECT_EQ(t.panel_elems, 64);
  EXPECT_EQ(t.writes.instructions, 8); // 64 f16 a thread: 32 pairs, four 8x8 matrices an instruction
  EXPECT_FALSE(t.writes.trans);
  EXPECT_TRUE(t.waits_for_stage); // persistent: the previous program's store may still read the stage
  const TensorMapParam& m = p.plan.tma.maps.at(static_cast<size_t>(t.map));
  EXPECT_EQ(m.base_param, param_index(p.kernel, "O"));
  EXPECT_EQ(m.box, (std::vector<int64_t>{128, 64}));
  EXPECT_EQ(m.order, (std::vector<int>{1, 0}));
  EXPECT_EQ(m.swizzle, SwizzleMode::Bytes128);
  EXPECT_EQ(m.outer.size(), 2u); // the batch and head terms of O's base
  EXPECT_EQ(s.stage_bytes, 128 * 128 * 2);
  EXPECT_EQ(s.stage_offset % 1024, 0);
  EXPECT_GE(s.stage_offset, std::max({p.plan.tiles_bytes + p.plan.scratch_bytes, p.plan.bulk.end(),
                                      p.plan.persistent.second_buffers_end}));
  for (const LayoutConversion& c : p.plan.conversions)
    EXPECT_NE(c.user, stores[0]) << "the store's value is staged as it is held";

  const GeneratedKernel g = generate_cuda(p.kernel, Target::parse("sm_90a"));
  EXPECT_EQ(g.shared_bytes, s.end());
  EXPECT_LE(g.shared_bytes + g.static_shared_bytes, Target::parse("sm_90a").max_shared_bytes_per_block());
  EXPECT_TRUE(has(g.lowered, "by TMA through kiln_map")) << g.lowered;
  for (const char* text : {"kiln::stmatrix_x4<false>(", "kiln::tma_store_4d(&kiln_map", "kiln::bulk_commit();",
                           "kiln::bulk_wait_read<0>();", "kiln::bulk_wait<0>();"})
    EXPECT_TRUE(has(g.source, text)) << text;
  EXPECT_FALSE(has(g.source, "kiln::exchange_lane_bit")) << "no lane exchanges for the store";
  expect_compiles_without_spills(g, "sm_90a");
}

// dK/dV's two stores share the stage: the first of a program that runs once writes it at once, the second waits
// for the first to have read it.
TEST(TmaStores, TwoStoresShareTheStageTheSecondWaits) {
  Planned p = plan_for("fa2_bwd_dkdv",
                       {{"WARP_SPECIALIZE", 1}, {"BLOCK_M", 64}, {"BLOCK_N", 128}, {"num_warps", 8}, {"HEAD_DIM", 64}},
                       "sm_90a");
  const std::vector<const Op*> stores = ops_of(p.kernel, OpKind::StoreBlock);
  ASSERT_EQ(stores.size(), 2u);
  ASSERT_EQ(p.plan.tma_stores.ops.size(), 2u);
  EXPECT_FALSE(p.plan.tma_stores.ops.at(stores[0]).waits_for_stage);
  EXPECT_TRUE(p.plan.tma_stores.ops.at(stores[1]).waits_for_stage);
  EXPECT_NE(p.plan.tma_stores.ops.at(stores[0]).map, p.plan.tma_stores.ops.at(stores[1]).map);
  EXPECT_EQ(p.plan.tma_stores.stage_bytes, 128 * 64 * 2); // one stage, the larger tile's
  const GeneratedKernel g = generate_cuda(p.kernel, Target::parse("sm_90a"));
  expect_compiles_without_spills(g, "sm_90a");
}

// Elsewhere the store stays on the register path and the plan says why.
TEST(TmaStores, ElsewhereTheStoreIsFromRegistersAndThePlanSaysWhy) {
  CodegenOptions off;
  off.tma_stores = false;
  CodegenOptions no_tma;
  no_tma.tma = false;
  struct Case {
    const char* what;
    std::map<std::string, int64_t> config;
    CodegenOptions options;
    const char* why;
  };
  std::map<std::string, int64_t> three_stages = kLatePersistentD128;
  three_stages["num_stages"] = 3;
  three_stages["PERSISTENT"] = 0;
  three_stages["TILE_BARRIERS"] = 0;
  const std::vector<Case> cases = {
      {"switched off", kLatePersistentD128, off, "TMA stores are off"},
      {"no TMA", kLatePersistentD128, no_tma, "the TMA unit is off"},
      {"not specialised", {{"WARP_SPECIALIZE", 0}}, {}, "not warp-specialised"},
      {"no room", three_stages, {}, "does not fit beside"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Planned p = plan_for("fa2_fwd", c.config, "sm_90a", c.options);
    EXPECT_FALSE(p.plan.tma_stores.any());
    const std::vector<const Op*> stores = ops_of(p.kernel, OpKind::StoreBlock);
    ASSERT_EQ(stores.size(), 1u);
    ASSERT_TRUE(p.plan.tma_stores.why_not.count(stores[0]));
    EXPECT_TRUE(has(p.plan.tma_stores.why_not.at(stores[0]), c.why)) << p.plan.tma_stores.why_not.at(stores[0]);
    const GeneratedKernel g = generate_cuda(p.kernel, Target::parse("sm_90a"), c.options);
    EXPECT_TRUE(has(g.lowered, "from registers, not by TMA")) << g.lowered;
    EXPECT_FALSE(has(g.source, "kiln::tma_store_"));
    EXPECT_EQ(g.tma_store_maps, 0);
  }
  // No TMA on the target: nothing planned, nothing said.
  Planned sm80 = plan_for("fa2_fwd", {}, "sm_80");
  EXPECT_FALSE(sm80.plan.tma_stores.any());
  EXPECT_TRUE(sm80.plan.tma_stores.why_not.empty());
}

// A matmul's warp-specialised tile stores C the same way (the C map has no per-program terms).
TEST(TmaStores, MatmulsWarpSpecialisedTileStoresCByTma) {
  Planned p = plan_for(
      "matmul", {{"BLOCK_M", 128}, {"BLOCK_N", 128}, {"MIN_BLOCKS_PER_SM", 1}, {"WARP_SPECIALIZE", 1}}, "sm_90a");
  ASSERT_EQ(p.plan.tma_stores.ops.size(), 1u);
  const TensorMapParam& m =
      p.plan.tma.maps.at(static_cast<size_t>(p.plan.tma_stores.ops.begin()->second.map));
  EXPECT_EQ(m.base_param, param_index(p.kernel, "C"));
  EXPECT_TRUE(m.outer.empty());
  expect_compiles_without_spills(generate_cuda(p.kernel, Target::parse("sm_90a")), "sm_90a");
}

} // namespace
} // namespace kiln_test
