// plan_producer_tiles (codegen/plan_producer_tiles.h): a warp-specialised program's tile loaded once before
// its loops (FA2's Q) is copied by the producer by TMA, before the ring's first copies, and the consumers
// wait on its full mbarrier where the program loads it; on a persistent grid, static or dynamic, into buffer
// k % 2 at turn k, released by every consumer warp at the program's end. Where the switch is off, the grid
// keeps one buffer, or the kernel is not warp-specialised, the consumers copy it as before and the plan says
// why.
#include "codegen/codegen.h"
#include "codegen/planned_kernel.h"
#include "codegen/source_text.h"
#include "nvrtc_compile.h"

#include <gtest/gtest.h>

namespace kiln_test {
namespace {

// The tuner's D = 128 FA2 tile: late products over two stages with tile barriers, on the hardware's grid.
std::map<std::string, int64_t> fa2_late_tile(int64_t persistent) {
  return {{"BLOCK_M", 128},       {"BLOCK_N", 128},         {"HEAD_DIM", 128},
          {"WARP_SPECIALIZE", 1}, {"LAST_PRODUCT_LATE", 1}, {"TILE_BARRIERS", 1},
          {"LAZY_RESCALE", 1},    {"num_stages", 2},        {"PERSISTENT", persistent}};
}

GeneratedKernel fa2_at(const std::map<std::string, int64_t>& overrides, const CodegenOptions& options = {}) {
  const KernelDef& def = builtin_kernels().find("fa2_fwd");
  return generate_cuda(def.build(def.with_overrides(def.default_config(), overrides)),
                       Target::parse("sm_90a"), options);
}

// The load of FA2's Q: the one top-level block load into a shared tile that no loop's ring holds.
const Op* q_load(const Planned& p) {
  const Op* q = nullptr;
  for (const auto& op : p.kernel.body.ops)
    if (op->kind == OpKind::LoadBlock && p.plan.where(op->result()) == Placement::Shared &&
        !p.plan.is_pipelined(p.plan.tiles[p.plan.tile_of.at(op->result())]))
      q = op.get();
  return q;
}

TEST(ProducerTiles, Fa2sQIsCopiedByTheProducerBeforeTheRingAndWaitedForOnItsBarrier) {
  Planned p = plan_for("fa2_fwd", fa2_late_tile(0), "sm_90a");
  ASSERT_TRUE(p.plan.ws.on()) << p.plan.ws.why_not;
  const ProducerTiles& pt = p.plan.producer_tiles;
  ASSERT_EQ(pt.tiles.size(), 1u) << pt.why_not;
  EXPECT_EQ(pt.tiles[0].load, q_load(p));
  EXPECT_EQ(pt.buffers, 1) << "one program a CTA";
  EXPECT_TRUE(pt.why_not.empty()) << pt.why_not;
  // Q is 128 x 128 16-bit elements: two 128-byte column panels, 32 KiB, through a map of its own.
  EXPECT_EQ(pt.tiles[0].copy.panels, 2);
  EXPECT_EQ(pt.tiles[0].copy.panel_elems, 64);
  EXPECT_EQ(pt.tiles[0].copy.bytes_per_stage, 128 * 128 * 2);
  ASSERT_LT(static_cast<size_t>(pt.tiles[0].copy.map), p.plan.tma.maps.size());
  EXPECT_EQ(p.plan.tma.maps[static_cast<size_t>(pt.tiles[0].copy.map)].box, (std::vector<int64_t>{128, 64}))
      << "128 rows of a 64-column line";

  const GeneratedKernel g = fa2_at(fa2_late_tile(0));
  EXPECT_EQ(g.tensor_maps.size(), 4u) << "K, V, Q and O's store";
  EXPECT_NE(g.lowered.find("copied by the producer by TMA"), std::string::npos) << g.lowered;
  // The producer copies Q before the ring's first slot; the consumers issue no cp.async at all and wait once.
  const size_t producer = g.source.find("// the producer warpgroup");
  const size_t consumers = g.source.find("// the consumers: the program");
  ASSERT_NE(producer, std::string::npos);
  ASSERT_NE(consumers, std::string::npos);
  const size_t q_copy = g.source.find("// producer: the tile of", producer);
  ASSERT_LT(q_copy, consumers);
  EXPECT_LT(q_copy, g.source.find("kiln_empty0", producer)) << "before the ring's first wait";
  EXPECT_EQ(occurrences(g.source.substr(q_copy, consumers - q_copy), "kiln::tma_load_"), 2 + 2 * 2 * 2)
      << "Q's two panels, then K's and V's in the two key loops";
  EXPECT_EQ(occurrences(g.source.substr(consumers), "cp_async"), 0);
  EXPECT_EQ(occurrences(g.source.substr(consumers), "kiln_tile_full[0]), 0)"), 1);
  EXPECT_EQ(g.source.find("kiln_tile_empty"), std::string::npos) << "one program: nothing to release";

  std::string why;
  if (!rt::nvrtc_available(&why))
    GTEST_SKIP() << "NVRTC not available: " << why;
  expect_compiles_without_spills(g, "sm_90a");
}

TEST(ProducerTiles, APersistentGridStaticOrDynamicFillsTheTurnsBufferAndTheConsumersReleaseIt) {
  for (int64_t persistent : {1, 2}) {
    SCOPED_TRACE(persistent);
    Planned p = plan_for("fa2_fwd", fa2_late_tile(persistent), "sm_90a");
    ASSERT_TRUE(p.plan.persistent.on) << p.plan.persistent.why_not;
    ASSERT_EQ(p.plan.persistent.prefetches.size(), 1u) << p.plan.persistent.why_not_prefetch;
    EXPECT_TRUE(p.plan.persistent.prefetches[0].double_buffered())
        << p.plan.persistent.why_not_second_buffers;
    const ProducerTiles& pt = p.plan.producer_tiles;
    ASSERT_EQ(pt.tiles.size(), 1u) << pt.why_not;
    EXPECT_EQ(pt.buffers, 2);

    const GeneratedKernel g = fa2_at(fa2_late_tile(persistent));
    const size_t consumers = g.source.find("// the consumers: the program");
    const std::string producer = g.source.substr(0, consumers), program = g.source.substr(consumers);
    // The producer walks turns: it waits for the buffer's release, then copies into it.
    EXPECT_NE(producer.find(persistent == 1 ? "kiln_program += gridDim.x, ++kiln_turn"
                                            : "for (int kiln_turn = 0;;"),
              std::string::npos);
    const size_t release_wait =
        producer.find("kiln_tile_empty[0 + (kiln_turn & 1)]), ((kiln_turn >> 1) & 1) ^ 1)");
    ASSERT_NE(release_wait, std::string::npos);
    EXPECT_LT(release_wait, producer.find("kiln_tile_full[0 + (kiln_turn & 1)]"));
    EXPECT_NE(producer.find("+ (kiln_turn & 1) * "), std::string::npos) << "the turn's buffer";
    if (persistent == 2) {
      EXPECT_NE(producer.find("if (kiln_ptid == 0) {", release_wait), std::string::npos) << "lane 0 issues";
    }
    // The consumers wait for the turn's parity and release the buffer once a program, at its end.
    EXPECT_EQ(occurrences(program, "kiln_tile_full[0 + (kiln_turn & 1)]), (kiln_turn >> 1) & 1)"), 1);
    EXPECT_EQ(
        occurrences(program, "kiln::mbarrier_arrive(kiln::smem_u32(&kiln_tile_empty[0 + (kiln_turn & 1)]))"),
        1);
    EXPECT_EQ(occurrences(program, "cp_async"), 0);
    EXPECT_EQ(program.find("the next program's tile of"), std::string::npos)
        << "the consumers copy nothing ahead";
    EXPECT_NE(g.lowered.find("turn k reads buffer k % 2, which the producer fills"), std::string::npos)
        << g.lowered;

    std::string why;
    if (!rt::nvrtc_available(&why))
      GTEST_SKIP() << "NVRTC not available: " << why;
    expect_compiles_without_spills(g, "sm_90a");
  }
}

TEST(ProducerTiles, TheConsumersCopyTheTileWhereTheProducerCannotAndThePlanSaysWhy) {
  // Switched off: the consumers' cp.async, and a dynamic grid's Q keeps one buffer.
  CodegenOptions off;
  off.producer_tiles = false;
  Planned switched = plan_for("fa2_fwd", fa2_late_tile(0), "sm_90a", off);
  EXPECT_FALSE(switched.plan.producer_tiles.on());
  EXPECT_NE(switched.plan.producer_tiles.why_not.find("CodegenOptions::producer_tiles is off"),
            std::string::npos)
      << switched.plan.producer_tiles.why_not;
  EXPECT_NE(fa2_at(fa2_late_tile(0), off).source.find("kiln::cp_async_commit();"), std::string::npos);
  Planned dynamic = plan_for("fa2_fwd", fa2_late_tile(2), "sm_90a", off);
  ASSERT_EQ(dynamic.plan.persistent.prefetches.size(), 1u);
  EXPECT_FALSE(dynamic.plan.persistent.prefetches[0].double_buffered());
  EXPECT_NE(dynamic.plan.persistent.why_not_second_buffers.find(
                "the grid is dynamic and the producer does not copy"),
            std::string::npos)
      << dynamic.plan.persistent.why_not_second_buffers;

  // A persistent grid without room for Q's second buffer (three stages of 128 x 128 at D = 128): with one
  // buffer the producer would wait for the program's end before the next program's ring, so the consumers
  // copy it.
  std::map<std::string, int64_t> three = fa2_late_tile(1);
  three["num_stages"] = 3;
  three["TILE_BARRIERS"] = 0;
  Planned full = plan_for("fa2_fwd", three, "sm_90a");
  EXPECT_FALSE(full.plan.producer_tiles.on());
  EXPECT_NE(full.plan.producer_tiles.why_not.find("one buffer on the persistent grid"), std::string::npos)
      << full.plan.producer_tiles.why_not;
  EXPECT_NE(fa2_at(three).source.find("copied while this program finishes"), std::string::npos);
  // ... while on the hardware's grid the same tile's Q is the producer's.
  three["PERSISTENT"] = 0;
  EXPECT_TRUE(plan_for("fa2_fwd", three, "sm_90a").plan.producer_tiles.on());

  // Not warp-specialised: no producer, nothing said.
  Planned plain = plan_for("fa2_fwd", {{"BLOCK_M", 128}, {"BLOCK_N", 64}, {"HEAD_DIM", 64}}, "sm_90a");
  EXPECT_FALSE(plain.plan.producer_tiles.on());
  EXPECT_TRUE(plain.plan.producer_tiles.why_not.empty());
}

// After the wait on a producer tile, one consumer warpgroup meets at its barrier (ptxas serialises its
// products otherwise, C7520); two warpgroups go straight on, which measured 2-4 % faster on FA2's late tile
// (worklog §109).
TEST(ProducerTiles, OneConsumerWarpgroupMeetsAfterTheWaitAndTwoDoNot) {
  const std::string marker = "the consumers reconverge before the products";
  const GeneratedKernel two = fa2_at(fa2_late_tile(0));
  ASSERT_NE(two.source.find("kiln_tile_full[0]), 0)"), std::string::npos) << "Q is the producer's";
  EXPECT_EQ(occurrences(two.source, marker), 0) << "two consumer warpgroups";

  const KernelDef& def = builtin_kernels().find("fa2_bwd_dkdv");
  const std::map<std::string, int64_t> one_group = {
      {"WARP_SPECIALIZE", 1}, {"HEAD_DIM", 128}, {"BLOCK_M", 64}, {"BLOCK_N", 64}, {"num_warps", 4}};
  Planned p = plan_for("fa2_bwd_dkdv", one_group, "sm_90a");
  ASSERT_TRUE(p.plan.ws.on()) << p.plan.ws.why_not;
  ASSERT_EQ(p.plan.num_warps, 4);
  const size_t tiles = p.plan.producer_tiles.tiles.size();
  ASSERT_GE(tiles, 2u) << "K and V: " << p.plan.producer_tiles.why_not;
  const GeneratedKernel one =
      generate_cuda(def.build(def.with_overrides(def.default_config(), one_group)), Target::parse("sm_90a"));
  EXPECT_EQ(occurrences(one.source, marker), static_cast<int>(tiles)) << "one barrier after each tile's wait";

  std::string why;
  if (!rt::nvrtc_available(&why))
    GTEST_SKIP() << "NVRTC not available: " << why;
  expect_compiles_without_spills(two, "sm_90a");
  expect_compiles_without_spills(one, "sm_90a");
}

// Every shipped kernel's warp-specialised renderings: each top-level tile loaded before the loops is either
// the producer's, with a map TMA can use, or the plan says why not.
TEST(ProducerTiles, EveryWarpSpecialisedKernelsTilesLoadedBeforeItsLoopsAreTheProducersOrExplained) {
  int copied = 0;
  for (const char* name : {"fa2_fwd", "fa2_bwd_dkdv", "fa2_bwd_dq"}) {
    SCOPED_TRACE(name);
    Planned p = plan_for(name, {{"WARP_SPECIALIZE", 1}, {"HEAD_DIM", 64}}, "sm_90a");
    if (!p.plan.ws.on())
      continue;
    for (const auto& op : p.kernel.body.ops) {
      if (op->kind != OpKind::LoadBlock || p.plan.where(op->result()) != Placement::Shared)
        continue;
      const SharedTile& t = p.plan.tiles[p.plan.tile_of.at(op->result())];
      if (p.plan.is_pipelined(t) || t.to_registers)
        continue;
      const int i = p.plan.producer_tiles.index_of(op.get());
      if (i < 0) {
        EXPECT_FALSE(p.plan.producer_tiles.why_not.empty()) << op->loc.str();
        continue;
      }
      ++copied;
      const ProducerTile& pt = p.plan.producer_tiles.tiles[static_cast<size_t>(i)];
      EXPECT_EQ(pt.copy.bytes_per_stage, t.bytes_per_stage());
      EXPECT_EQ(pt.copy.panels * pt.copy.panel_elems, t.cols);
    }
  }
  EXPECT_GE(copied, 1);
}

} // namespace
} // namespace kiln_test
