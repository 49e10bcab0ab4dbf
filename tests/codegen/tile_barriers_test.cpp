// plan_tile_barriers (codegen/plan_tile_barriers.h): which warp-specialised rings take a full and an empty mbarrier
// per tile of a slot (TILE_BARRIERS=1), which tiles LAST_PRODUCT_LATE then hands back right after the first
// products' wait, how the producer and the consumers use the barriers, that the result compiles without spills or
// serialised products at two stages (D = 64, 128 and 256), and why a config that does not allow it keeps one pair a
// slot.
#include "codegen/codegen.h"
#include "kernels/attention/attention_block_mask.h"
#include "kernels/attention/attention_mod_spec.h"
#include "kernels/attention/fa2_fwd.h"
#include "codegen/planned_kernel.h"
#include "codegen/source_text.h"
#include "nvrtc_compile.h"

#include <gtest/gtest.h>

namespace kiln_test {
namespace {

std::map<std::string, int64_t> fa2_tile_barriers(int64_t causal, int64_t head_dim = 128, int64_t block_n = 128,
                                                  int64_t stages = 2) {
  return {{"HEAD_DIM", head_dim},   {"BLOCK_N", block_n}, {"CAUSAL", causal},       {"WARP_SPECIALIZE", 1},
          {"num_stages", stages},   {"num_warps", 8},     {"LAST_PRODUCT_LATE", 1}, {"TILE_BARRIERS", 1}};
}

GeneratedKernel fa2_sm90a(const std::map<std::string, int64_t>& overrides) {
  const KernelDef& def = builtin_kernels().find("fa2_fwd");
  return generate_cuda(def.build(def.with_overrides(def.default_config(), overrides)), Target::parse("sm_90a"));
}

// FA2's key loops read K only in S = Q Kᵀ (the first product) and V only in P V (the late one): K's tile goes back
// right after S's wait, V's with P V an iteration later; the ring's barriers are two per slot each.
TEST(TileBarriers, Fa2HandsKBackAfterTheFirstProductAndVWithTheLateOne) {
  for (int64_t causal : {0, 1, 2}) {
    SCOPED_TRACE("CAUSAL=" + std::to_string(causal));
    Planned p = plan_for("fa2_fwd", fa2_tile_barriers(causal), "sm_90a");
    ASSERT_TRUE(p.plan.ws.tile_barriers) << p.plan.ws.why_not_tile_barriers;
    EXPECT_EQ(p.plan.tma.barrier_bytes, 2 * 8 * 2 * 2 + 2 * 8); // full and empty, 2 stages, K and V; Q's pair
    const std::vector<const Op*> loops = ops_of(p.kernel, OpKind::For);
    ASSERT_EQ(loops.size(), 2u);
    for (const Op* loop : loops) {
      const std::vector<const Op*>& loads = p.plan.pipelined.at(loop);
      ASSERT_EQ(loads.size(), 2u); // K then V
      const LateProduct& late = p.plan.late.loops.at(loop);
      EXPECT_EQ(late.released_after_first, std::vector<const Op*>{loads[0]});
    }
  }
}

// The emitted order: the producer waits for each tile's own release before copying it; a consumer waits for K's
// tile where K is loaded, hands it back after the first product's wait and before it waits for V's tile, and hands
// V's back (the previous slot's) where the late product has been waited for.
TEST(TileBarriers, TheProducerAndTheConsumersUseEachTilesOwnBarriers) {
  const GeneratedKernel g = fa2_sm90a(fa2_tile_barriers(0));
  const std::string& src = g.source;
  EXPECT_NE(src.find("kiln_full0[2 * 2]"), std::string::npos);
  EXPECT_NE(src.find("kiln_empty0[2 * 2]"), std::string::npos);
  // The producer: a release wait per tile, each before that tile's arrival on its full barrier.
  const size_t k_release = src.find("kiln_empty0[(slot");
  ASSERT_NE(k_release, std::string::npos);
  const size_t k_full = src.find("kiln_full0[(slot", k_release);
  const size_t v_release = src.find("kiln_empty0[(slot", k_release + 1);
  const size_t v_full = src.find("kiln_full0[(slot", v_release);
  ASSERT_NE(v_full, std::string::npos);
  EXPECT_LT(k_full, v_release);
  EXPECT_NE(src.substr(k_release, 40).find("* 2 + 0]"), std::string::npos);
  EXPECT_NE(src.substr(v_release, 40).find("* 2 + 1]"), std::string::npos);
  // A consumer's first key loop: K's wait, the first product's wait, K's release, then V's wait.
  const size_t k_wait = src.find("fa2_fwd.cpp:109's tile alone");
  ASSERT_NE(k_wait, std::string::npos);
  const size_t first_done = src.find("kiln::wgmma_wait<1>(); // this iteration's first product", k_wait);
  const size_t k_back = src.find("done with the tile of fa2_fwd.cpp:109", k_wait);
  const size_t v_wait = src.find("fa2_fwd.cpp:126's tile alone", k_wait);
  ASSERT_NE(first_done, std::string::npos);
  ASSERT_NE(k_back, std::string::npos);
  ASSERT_NE(v_wait, std::string::npos);
  EXPECT_LT(first_done, k_back);
  EXPECT_LT(k_back, v_wait);
  // V goes back from the previous slot, after the late product's wait.
  const size_t late_wait = src.find("the previous iteration's product at fa2_fwd.cpp:134 is done", k_wait);
  const size_t v_back = src.find("done with the tile of fa2_fwd.cpp:126", k_wait);
  ASSERT_NE(late_wait, std::string::npos);
  ASSERT_NE(v_back, std::string::npos);
  EXPECT_LT(late_wait, v_back);
  EXPECT_NE(src.substr(v_back, 200).find("% 2)) * 2 + 1]"), std::string::npos);
  // Every tile is waited for and released alike in both loops, and V once more after the second loop (the first
  // loop's last V goes back in the second loop's first iteration, which issues its late product).
  EXPECT_EQ(occurrences(src, "'s tile alone"), 4);
  EXPECT_EQ(occurrences(src, "done with the tile of fa2_fwd.cpp:109"), 2);
  EXPECT_EQ(occurrences(src, "done with the tile of fa2_fwd.cpp:126"), 3);
}

// With one barrier pair a slot, two stages held the slot (K too) until the next iteration's late wait; with a pair
// per tile they compile as the three-stage tiles do: no spill, no serialised product, at D = 64, 128 and 256 (whose
// 64-key tiles need two stages to fit: 192 KiB), causal or not.
TEST(TileBarriers, TwoStageLateTilesCompileWithoutSpillsOrSerialisedProducts) {
  std::string why;
  if (!rt::nvrtc_available(&why))
    GTEST_SKIP() << "NVRTC not available: " << why;
  for (const auto& [head_dim, block_n] : std::vector<std::pair<int64_t, int64_t>>{{64, 128}, {128, 128}, {256, 64}})
    for (int64_t causal : {0, 1}) {
      const GeneratedKernel g = fa2_sm90a(fa2_tile_barriers(causal, head_dim, block_n));
      SCOPED_TRACE("HEAD_DIM=" + std::to_string(head_dim) + " CAUSAL=" + std::to_string(causal));
      ASSERT_TRUE(g.why_not_tile_barriers.empty()) << g.why_not_tile_barriers;
      ASSERT_TRUE(g.why_not_late_product.empty()) << g.why_not_late_product;
      const std::string log = expect_compiles_without_spills(g, "sm_90a");
      EXPECT_TRUE(rt::ptxas_product_advisories(log).empty()) << log;
    }
}

// Where a ring cannot take them the kernel keeps one pair a slot and says why; asked for nowhere, nothing changes.
TEST(TileBarriers, AConfigThatCannotTakeThemKeepsOnePairASlotAndSaysWhy) {
  std::map<std::string, int64_t> ahead = fa2_tile_barriers(0);
  ahead["LAST_PRODUCT_LATE"] = 0;
  ahead["PRODUCT_AHEAD"] = 1;
  Planned p = plan_for("fa2_fwd", ahead, "sm_90a");
  EXPECT_FALSE(p.plan.ws.tile_barriers);
  EXPECT_NE(p.plan.ws.why_not_tile_barriers.find("PRODUCT_AHEAD"), std::string::npos)
      << p.plan.ws.why_not_tile_barriers;
  Planned sm80 = plan_for("fa2_fwd", fa2_tile_barriers(0), "sm_80");
  EXPECT_FALSE(sm80.plan.ws.tile_barriers);
  EXPECT_NE(sm80.plan.ws.why_not_tile_barriers.find("not warp-specialised"), std::string::npos)
      << sm80.plan.ws.why_not_tile_barriers;
  CodegenOptions switched_off;
  switched_off.tile_barriers = false;
  EXPECT_EQ(plan_for("fa2_fwd", fa2_tile_barriers(0), "sm_90a", switched_off).plan.ws.why_not_tile_barriers,
            "CodegenOptions::tile_barriers is off");
  std::map<std::string, int64_t> off = fa2_tile_barriers(0);
  off["TILE_BARRIERS"] = 0;
  Planned plain = plan_for("fa2_fwd", off, "sm_90a");
  EXPECT_FALSE(plain.plan.ws.tile_barriers);
  EXPECT_TRUE(plain.plan.ws.why_not_tile_barriers.empty());
  EXPECT_EQ(plain.plan.tma.barrier_bytes, 2 * 8 * 2 + 2 * 8); // and Q's pair (codegen/plan_producer_tiles.h)
  // Without a late product every tile goes back where the slot did (all of them at the body's end).
  std::map<std::string, int64_t> early = fa2_tile_barriers(0);
  early["LAST_PRODUCT_LATE"] = 0;
  const GeneratedKernel g = fa2_sm90a(early);
  ASSERT_TRUE(g.why_not_tile_barriers.empty()) << g.why_not_tile_barriers;
  EXPECT_EQ(occurrences(g.source, "done with the tiles of fa2_fwd.cpp:109, fa2_fwd.cpp:126"), 2);
}

// FA2's space offers the three two-stage late tiles with tile barriers and the 128 x 128 one on a static and on a
// dynamic persistent grid, and so does its space with mods. Over a block mask they are warp-specialised, so only the
// spaces whose lists are runs (BLOCK_MASK_RUNS=1) hold them: the three 128 x 128 ones at 128 keys (the persistent
// ones then pruned) and the two 128 x 64 ones at 64.
TEST(TileBarriers, OfferedInFa2sSpacesWithModsAndOverBlockMasksOfRuns) {
  auto with_tile_barriers = [](const std::vector<Config>& space) {
    return std::count_if(space.begin(), space.end(), [](const Config& c) { return c.get_or("TILE_BARRIERS", 0) != 0; });
  };
  EXPECT_EQ(with_tile_barriers(kiln::fa2_fwd_def().config_space()), 5);
  const kiln::AttentionMods mods = kiln::parse_mod_specs("softcap=30").mods;
  EXPECT_EQ(with_tile_barriers(kiln::fa2_fwd_def(mods).config_space()), 5);
  for (bool runs : {false, true})
    for (int64_t bn : {64, 128})
      EXPECT_EQ(with_tile_barriers(kiln::fa2_fwd_block_mask_tuning_def(mods, 128, bn, runs).config_space()),
                runs ? (bn == 128 ? 3 : 2) : 0)
          << "runs=" << runs << " BLOCK_N=" << bn;
}

} // namespace
} // namespace kiln_test
