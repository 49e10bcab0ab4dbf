// plan_prefetch_buffers (codegen/plan_prefetch_buffers.h): on a static persistent grid of a warp-specialised kernel,
// a tile the program prefetches (FA2's Q) gets a second buffer after the rest of shared memory; the program of turn
// k reads buffer k % 2 and issues the next program's copy into the other one where it starts, right after its own
// tile is published (where the producer does not copy it: producer_tiles_test.cpp covers the producer's copies).
// Where the buffer does not fit, the grid is dynamic and the producer does not copy the tile, the kernel is not
// warp-specialised or the switch is off, the tile keeps one buffer and the plan says why.
#include "codegen/codegen.h"
#include "codegen/planned_kernel.h"
#include "codegen/source_text.h"
#include "nvrtc_compile.h"

#include <gtest/gtest.h>

namespace kiln_test {
namespace {

// The tuner's persistent FA2 tile: late products over two stages with tile barriers.
std::map<std::string, int64_t> fa2_persistent_two_stages(int64_t head_dim) {
  return {{"BLOCK_M", 128},          {"BLOCK_N", 128},     {"HEAD_DIM", head_dim}, {"WARP_SPECIALIZE", 1},
          {"LAST_PRODUCT_LATE", 1},  {"TILE_BARRIERS", 1}, {"LAZY_RESCALE", 1},    {"num_stages", 2},
          {"PERSISTENT", 1}};
}

GeneratedKernel fa2_at(const std::map<std::string, int64_t>& overrides, const CodegenOptions& options = {}) {
  const KernelDef& def = builtin_kernels().find("fa2_fwd");
  return generate_cuda(def.build(def.with_overrides(def.default_config(), overrides)), Target::parse("sm_90a"),
                       options);
}

// The consumers' copies: the producer's are switched off (plan_producer_tiles.h).
CodegenOptions consumers_copy() {
  CodegenOptions o;
  o.producer_tiles = false;
  return o;
}

TEST(PrefetchBuffers, Fa2ForwardReadsQFromTheTurnsBufferAndCopiesTheNextOneWhereItStarts) {
  for (int64_t d : {64, 128}) {
    SCOPED_TRACE(d);
    Planned p = plan_for("fa2_fwd", fa2_persistent_two_stages(d), "sm_90a", consumers_copy());
    const PersistentGrid& grid = p.plan.persistent;
    ASSERT_TRUE(grid.on) << grid.why_not;
    ASSERT_EQ(grid.prefetches.size(), 1u) << grid.why_not_prefetch;
    const PersistentPrefetch& q = grid.prefetches[0];
    ASSERT_TRUE(q.double_buffered()) << grid.why_not_second_buffers;
    EXPECT_EQ(grid.next_copies_after, q.load) << "Q is the last tile the program copies before its loops";
    EXPECT_GE(q.second_offset, p.plan.tiles_bytes + p.plan.scratch_bytes) << "after everything else";
    EXPECT_EQ(q.second_offset % 1024, 0) << "the swizzle's period";
    const SharedTile& t = p.plan.tiles[p.plan.tile_of.at(q.load->result())];
    EXPECT_EQ(grid.second_buffers_end, q.second_offset + t.bytes_per_stage());

    const GeneratedKernel g = fa2_at(fa2_persistent_two_stages(d), consumers_copy());
    CodegenOptions one_buffer = consumers_copy();
    one_buffer.prefetch_buffers = false;
    const GeneratedKernel single = fa2_at(fa2_persistent_two_stages(d), one_buffer);
    EXPECT_EQ(g.shared_bytes, single.shared_bytes + t.bytes_per_stage());
    EXPECT_NE(g.lowered.find("prefetched into a second buffer"), std::string::npos) << g.lowered;
    EXPECT_NE(single.lowered.find("one buffer: CodegenOptions::prefetch_buffers is off"), std::string::npos)
        << single.lowered;

    // The consumers' loop counts turns; Q's products read the turn's buffer.
    EXPECT_NE(g.source.find("kiln_program += gridDim.x, ++kiln_turn"), std::string::npos);
    const std::string turn_buffer = fmt::format("({} + (kiln_turn & 1) * {})", t.offset, q.second_offset - t.offset);
    EXPECT_GE(occurrences(g.source, "kiln::wgmma_desc(kiln::smem_u32(kiln_smem) + " + turn_buffer), 2)
        << "both key loops' Q Kᵀ";
    // One next copy a program, into the other buffer, after the barrier that publishes this program's Q and before
    // the first key loop; none after the loops.
    ASSERT_EQ(occurrences(g.source, "the next program's tile of"), 1);
    const size_t next = g.source.find("the next program's tile of");
    EXPECT_NE(g.source.find("copied into the other buffer while this program runs", next), std::string::npos);
    const size_t published = g.source.rfind("kiln::named_barrier_sync(1, 256);", next);
    ASSERT_NE(published, std::string::npos);
    EXPECT_LT(g.source.rfind("kiln::cp_async_wait_all();", next), published);
    EXPECT_LT(g.source.rfind("kiln::wgmma_wait<0>(); // the program before has no product left", next), published)
        << "every consumer's products of the program before are done before the barrier";
    EXPECT_NE(g.source.find("((kiln_turn + 1) & 1)) * " + std::to_string(q.second_offset - t.offset), next),
              std::string::npos);
    EXPECT_LT(next, g.source.find("kiln::wgmma_desc", next)) << "before the first product";
    EXPECT_EQ(g.source.find("copied while this program finishes"), std::string::npos);

    std::string why;
    if (!rt::nvrtc_available(&why))
      GTEST_SKIP() << "NVRTC not available: " << why;
    expect_compiles_without_spills(g, "sm_90a");
  }
}

TEST(PrefetchBuffers, OneBufferWhereTheSecondDoesNotFitOrCannotBeUsedAndWhy) {
  // Three stages of 128 x 128 at D = 128 leave no room for a second Q: the copy stays after the loops.
  std::map<std::string, int64_t> three = fa2_persistent_two_stages(128);
  three["num_stages"] = 3;
  three["TILE_BARRIERS"] = 0;
  Planned full = plan_for("fa2_fwd", three, "sm_90a");
  ASSERT_EQ(full.plan.persistent.prefetches.size(), 1u);
  EXPECT_FALSE(full.plan.persistent.prefetches[0].double_buffered());
  EXPECT_NE(full.plan.persistent.why_not_second_buffers.find("232448 a block"), std::string::npos)
      << full.plan.persistent.why_not_second_buffers;
  const GeneratedKernel g = fa2_at(three);
  EXPECT_NE(g.source.find("copied while this program finishes"), std::string::npos);
  EXPECT_EQ(g.source.find("kiln_turn"), std::string::npos);

  // A dynamic grid's consumers learn the next id near the program's end: two buffers only where the producer, which
  // draws the ids, copies the tile.
  std::map<std::string, int64_t> dynamic = fa2_persistent_two_stages(64);
  dynamic["PERSISTENT"] = 2;
  Planned drawn = plan_for("fa2_fwd", dynamic, "sm_90a", consumers_copy());
  ASSERT_EQ(drawn.plan.persistent.prefetches.size(), 1u);
  EXPECT_FALSE(drawn.plan.persistent.prefetches[0].double_buffered());
  EXPECT_NE(drawn.plan.persistent.why_not_second_buffers.find("dynamic"), std::string::npos);
  EXPECT_TRUE(plan_for("fa2_fwd", dynamic, "sm_90a").plan.persistent.prefetches[0].double_buffered());

  // Without a producer the program's cp.async groups hold K and V too.
  Planned plain = plan_for("fa2_fwd", {{"BLOCK_M", 128}, {"BLOCK_N", 64}, {"HEAD_DIM", 64}, {"PERSISTENT", 1}},
                           "sm_90a");
  ASSERT_EQ(plain.plan.persistent.prefetches.size(), 1u) << plain.plan.persistent.why_not_prefetch;
  EXPECT_FALSE(plain.plan.persistent.prefetches[0].double_buffered());
  EXPECT_NE(plain.plan.persistent.why_not_second_buffers.find("not warp-specialised"), std::string::npos)
      << plain.plan.persistent.why_not_second_buffers;

  // Not persistent: nothing to do and nothing said.
  Planned once = plan_for("fa2_fwd", {{"WARP_SPECIALIZE", 1}}, "sm_90a");
  EXPECT_EQ(once.plan.persistent.second_buffers_end, 0);
  EXPECT_TRUE(once.plan.persistent.why_not_second_buffers.empty());
}

} // namespace
} // namespace kiln_test
