// plan_persistent_grid (codegen/plan_persistent_grid.h): PERSISTENT=1 runs the program in a loop over program
// ids, one wave of MIN_BLOCKS_PER_SM CTAs an SM; where the kernel reads program ids along y or z, or the switch
// is off, the kernel stays as it was and says why. A shared tile copied once a program (FA2's Q) is prefetched:
// the program copies the next one's after its last reader, or says why not. PERSISTENT=2 draws each CTA's next
// program id from a counter the launch passes (kiln::draw_program), once a program.
#include "codegen/codegen.h"
#include "nvrtc_compile.h"
#include "codegen/planned_kernel.h"
#include "codegen/source_text.h"
#include "dsl/dsl.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <tuple>

namespace kiln_test {
namespace {

GeneratedKernel matmul_at(const std::map<std::string, int64_t>& overrides, const std::string& arch,
                          const CodegenOptions& options = {}) {
  const KernelDef& def = builtin_kernels().find("matmul");
  return generate_cuda(def.build(def.with_overrides(def.default_config(), overrides)), Target::parse(arch), options);
}

TEST(PersistentGrid, MatmulWalksItsTilesWithAWaveOfMinBlocksPerSm) {
  Planned p = plan_for("matmul", {{"PERSISTENT", 1}}, "sm_80");
  EXPECT_TRUE(p.plan.persistent.on) << p.plan.persistent.why_not;
  EXPECT_EQ(p.plan.persistent.ctas_per_sm, 2); // matmul's default MIN_BLOCKS_PER_SM
  const GeneratedKernel g = matmul_at({{"PERSISTENT", 1}}, "sm_80");
  EXPECT_EQ(g.persistent_ctas_per_sm, 2);
  EXPECT_TRUE(g.why_not_persistent.empty());
  // program_id(0) is the loop's variable everywhere; the launch's grid size is the kernel's last parameter.
  EXPECT_EQ(occurrences(g.source, "(int)blockIdx.x"), 0) << g.source;
  EXPECT_EQ(occurrences(g.source, "kiln_program = blockIdx.x"), 1);
  EXPECT_NE(g.source.find(", int kiln_programs)"), std::string::npos);
  EXPECT_EQ(matmul_at({}, "sm_80").persistent_ctas_per_sm, 0);
}

TEST(PersistentGrid, AWarpSpecialisedProducerWalksTheSameProgramIds) {
  const GeneratedKernel g = matmul_at({{"BLOCK_M", 128},
                                       {"BLOCK_N", 256},
                                       {"BLOCK_K", 64},
                                       {"MIN_BLOCKS_PER_SM", 1},
                                       {"WARP_SPECIALIZE", 1},
                                       {"PERSISTENT", 1}},
                                      "sm_90a");
  EXPECT_TRUE(g.why_not_warp_specialized.empty()) << g.why_not_warp_specialized;
  EXPECT_EQ(g.threads, 384);
  EXPECT_EQ(g.persistent_ctas_per_sm, 1);
  // One loop over program ids in the producer's branch, one in the consumers'; the maps, then the switch (which a
  // warp-specialised kernel does not read), then the grid size.
  EXPECT_EQ(occurrences(g.source, "kiln_program = blockIdx.x"), 2) << g.source;
  EXPECT_NE(g.source.find("int /* kiln_tma: always 1 here */, int kiln_programs)"), std::string::npos);
  EXPECT_NE(g.lowered.find("persistent grid: 1 CTA(s) an SM"), std::string::npos) << g.lowered;
}

// FA2's forward with PERSISTENT=1 numbers its programs along x (query_tile_program), so the persistent grid
// applies; its head coordinates (program / tiles) are still provably non-negative, so K and V keep their TMA
// copies and the producer warpgroup walks the same programs, running into the next query tile's keys.
TEST(PersistentGrid, Fa2ForwardWalksItsQueryTilesWarpSpecialisedWithTma) {
  for (int causal : {0, 1}) {
    const KernelDef& def = builtin_kernels().find("fa2_fwd");
    const Config c = def.with_overrides(def.default_config(), {{"BLOCK_M", 128},
                                                               {"BLOCK_N", 128},
                                                               {"HEAD_DIM", 128},
                                                               {"CAUSAL", causal},
                                                               {"WARP_SPECIALIZE", 1},
                                                               {"PERSISTENT", 1}});
    const GeneratedKernel g = generate_cuda(def.build(c), Target::parse("sm_90a"));
    SCOPED_TRACE(c.str());
    EXPECT_TRUE(g.why_not_persistent.empty()) << g.why_not_persistent;
    EXPECT_EQ(g.persistent_ctas_per_sm, 1);
    EXPECT_TRUE(g.why_not_warp_specialized.empty()) << g.why_not_warp_specialized;
    // K and V, Q where the producer copies it (it has two buffers: codegen/plan_producer_tiles.h), and O's store
    // (codegen/plan_tma_stores.h).
    EXPECT_EQ(g.producer_tile_maps, 1) << g.lowered;
    EXPECT_EQ(g.tensor_maps.size(), 4u) << g.lowered;
    EXPECT_EQ(g.tma_store_maps, 1);
    EXPECT_EQ(occurrences(g.source, "kiln_program = blockIdx.x"), 2) << g.source;
    EXPECT_EQ(occurrences(g.source, "blockIdx.y"), 0);
  }
}

TEST(PersistentGrid, SwitchedOffOrNotAskedForNothingChanges) {
  CodegenOptions off;
  off.persistent = false;
  const GeneratedKernel g = matmul_at({{"PERSISTENT", 1}}, "sm_90a", off);
  EXPECT_EQ(g.persistent_ctas_per_sm, 0);
  EXPECT_EQ(g.why_not_persistent, "CodegenOptions::persistent is off");
  EXPECT_EQ(occurrences(g.source, "kiln_program"), 0);
  Planned p = plan_for("matmul", {}, "sm_90a");
  EXPECT_FALSE(p.plan.persistent.on);
  EXPECT_TRUE(p.plan.persistent.why_not.empty());
}

TEST(PersistentGrid, ProgramIdsAlongYAreRefusedWithTheirLine) {
  Config cfg;
  cfg.set("PERSISTENT", 1);
  KernelBuilder kb("rows_and_columns", cfg);
  Value x = kb.arg_ptr("x", f32);
  Value offs = (program_id(1) * 128 + program_id(0)) * 64 + arange(0, 64);
  store(x + offs, load(x + offs) * 2.0f);
  const GeneratedKernel g = generate_cuda(kb.finish(), Target::parse("sm_90a"));
  EXPECT_EQ(g.persistent_ctas_per_sm, 0);
  EXPECT_NE(g.why_not_persistent.find("program_id(1) at persistent_grid_test.cpp:"), std::string::npos)
      << g.why_not_persistent;
}

std::map<std::string, int64_t> fa2_late_persistent(int causal) {
  return {{"BLOCK_M", 128},         {"BLOCK_N", 128},        {"HEAD_DIM", 128}, {"CAUSAL", causal},
          {"WARP_SPECIALIZE", 1},   {"LAST_PRODUCT_LATE", 1}, {"num_stages", 3}, {"PERSISTENT", 1}};
}

// Q is copied once a program, before the key loops, and read last by the last key loop: the next program's copy
// is issued after that loop (its products waited for, every consumer past them) and before O is stored, for the
// next program id's Q; a CTA's first program copies its own.
TEST(PersistentGrid, Fa2ForwardCopiesTheNextProgramsQUnderItsEpilogue) {
  for (int causal : {0, 1}) {
    SCOPED_TRACE(causal);
    Planned p = plan_for("fa2_fwd", fa2_late_persistent(causal), "sm_90a");
    ASSERT_TRUE(p.plan.persistent.on) << p.plan.persistent.why_not;
    EXPECT_TRUE(p.plan.persistent.why_not_prefetch.empty()) << p.plan.persistent.why_not_prefetch;
    ASSERT_EQ(p.plan.persistent.prefetches.size(), 1u);
    const PersistentPrefetch& q = p.plan.persistent.prefetches[0];
    EXPECT_EQ(p.plan.where(q.load->result()), Placement::Shared);
    EXPECT_EQ(q.issue_after->kind, OpKind::For);
    const Op* last_loop = nullptr;
    for (const auto& op : p.kernel.body.ops)
      if (op->kind == OpKind::For)
        last_loop = op.get();
    EXPECT_EQ(q.issue_after, last_loop) << "the last key loop reads Q last";
    EXPECT_FALSE(q.slice.empty());
    bool reads_program_id = false;
    for (const Op* op : q.slice)
      reads_program_id |= op->kind == OpKind::ProgramId;
    EXPECT_TRUE(reads_program_id) << "Q's block pointer is the program's";

    const KernelDef& def = builtin_kernels().find("fa2_fwd");
    const GeneratedKernel g =
        generate_cuda(def.build(def.with_overrides(def.default_config(), fa2_late_persistent(causal))),
                      Target::parse("sm_90a"));
    EXPECT_EQ(occurrences(g.source, "this CTA's first program copies its own tile"), 1) << g.source;
    const size_t next = g.source.find("the next program's tile of");
    ASSERT_NE(next, std::string::npos) << g.source;
    EXPECT_EQ(occurrences(g.source, "the next program's tile of"), 1);
    EXPECT_LT(g.source.rfind("kiln::wgmma_wait<0>();", next), next);
    EXPECT_LT(next, g.source.find("kiln::wgmma_wait<0>(); // this thread's products that read the tile", next - 200));
    EXPECT_LT(next, g.source.find("store_block", next)) << "issued before O is stored";
    EXPECT_NE(g.source.find("= next_program", next), std::string::npos) << "Q's row from the next program id";
    EXPECT_NE(g.lowered.find("prefetched: the next program's copy issued after the op at"), std::string::npos)
        << g.lowered;
    std::string why;
    if (!rt::nvrtc_available(&why))
      GTEST_SKIP() << "NVRTC not available: " << why;
    expect_compiles_without_spills(g, "sm_90a");
  }
}

// D = 96 as two head-dim tiles (SPLIT_D): two Q tiles, each prefetched under a name of its own, on both grids; the
// consumers' copies (the producer's switched off), and the producer's: two tiles, each with its own barriers.
TEST(PersistentGrid, TwoPrefetchedTilesEachTakeTheirOwnNextProgramId) {
  CodegenOptions consumers_copy;
  consumers_copy.producer_tiles = false;
  for (int persistent : {1, 2}) {
    const KernelDef& def = builtin_kernels().find("fa2_fwd");
    const Config c = def.with_overrides(def.default_config(), {{"BLOCK_M", 128},
                                                               {"BLOCK_N", 64},
                                                               {"HEAD_DIM", 128},
                                                               {"SPLIT_D", 1},
                                                               {"CAUSAL", 1},
                                                               {"WARP_SPECIALIZE", 1},
                                                               {"PERSISTENT", persistent}});
    SCOPED_TRACE(c.str());
    const GeneratedKernel g = generate_cuda(def.build(c), Target::parse("sm_90a"), consumers_copy);
    ASSERT_TRUE(g.why_not_persistent.empty()) << g.why_not_persistent;
    EXPECT_EQ(occurrences(g.source, "the next program's tile of"), 2) << g.lowered;
    expect_nvrtc_compiles(g, "sm_90a");
    const GeneratedKernel by_producer = generate_cuda(def.build(c), Target::parse("sm_90a"));
    EXPECT_EQ(by_producer.producer_tile_maps, 2) << by_producer.lowered;
    EXPECT_EQ(occurrences(by_producer.source, "the next program's tile of"), 0);
    EXPECT_EQ(occurrences(by_producer.source, "kiln_tile_full[2 + (kiln_turn & 1)]"), 2) << "the producer's and the "
                                                                                           "consumers' of the second";
    expect_nvrtc_compiles(by_producer, "sm_90a");
  }
}

TEST(PersistentGrid, NotPersistentOrNothingCopiedOncePrefetchesNothing) {
  Planned fa2 = plan_for("fa2_fwd", {{"BLOCK_M", 128}, {"HEAD_DIM", 128}, {"WARP_SPECIALIZE", 1}}, "sm_90a");
  EXPECT_TRUE(fa2.plan.persistent.prefetches.empty());
  // Matmul's tiles are all its loop's ring: nothing is copied once a program.
  Planned mm = plan_for("matmul", {{"PERSISTENT", 1}}, "sm_80");
  ASSERT_TRUE(mm.plan.persistent.on);
  EXPECT_TRUE(mm.plan.persistent.prefetches.empty());
  EXPECT_TRUE(mm.plan.persistent.why_not_prefetch.empty()) << mm.plan.persistent.why_not_prefetch;
}

// Two tiles copied once a program and multiplied: the one whose block pointer is made of program ids and
// parameters is prefetched; the one whose row comes from a tensor the kernel writes is copied where the program
// starts, and the plan says why (the next program's value may not be written yet).
TEST(PersistentGrid, ATileWhoseAddressTheProgramWritesIsNotPrefetched) {
  Config cfg;
  cfg.set("PERSISTENT", 1);
  cfg.set("num_warps", 4);
  KernelBuilder kb("gathered_rows", cfg);
  Value a = kb.arg_ptr("a", f16), b = kb.arg_ptr("b", f16), c = kb.arg_ptr("c", f32), rows = kb.arg_ptr("rows", i32);
  Value n = kb.arg("N", i32);
  Value pid = program_id(0);
  Value row = load(rows + pid);
  Value ta = load(make_block_ptr(a, {n, 64}, {64, 1}, {row, 0}, {64, 64}, {1, 0}));
  Value tb = load(make_block_ptr(b, {n, 64}, {64, 1}, {pid * 64, 0}, {64, 64}, {1, 0}));
  Value prod = dot(ta, tb);
  store(make_block_ptr(c, {n, 64}, {64, 1}, {pid * 64, 0}, {64, 64}, {1, 0}), prod);
  store(rows + pid, row + 1);
  Planned p = plan_kernel(kb.finish(), "sm_80");
  ASSERT_TRUE(p.plan.persistent.on) << p.plan.persistent.why_not;
  std::vector<const Op*> tiles; // the two block loads, in program order; then the product
  const Op* product = nullptr;
  for (const auto& op : p.kernel.body.ops) {
    if (op->kind == OpKind::LoadBlock)
      tiles.push_back(op.get());
    if (op->kind == OpKind::Dot)
      product = op.get();
  }
  ASSERT_EQ(tiles.size(), 2u);
  ASSERT_EQ(p.plan.where(tiles[0]->result()), Placement::Shared);
  ASSERT_EQ(p.plan.persistent.prefetches.size(), 1u);
  EXPECT_EQ(p.plan.persistent.prefetches[0].load, tiles[1]);
  EXPECT_EQ(p.plan.persistent.prefetches[0].issue_after, product);
  EXPECT_NE(p.plan.persistent.why_not_prefetch.find("cannot be computed again"), std::string::npos)
      << p.plan.persistent.why_not_prefetch;
  EXPECT_NE(p.plan.persistent.why_not_prefetch.find("persistent_grid_test.cpp:"), std::string::npos)
      << p.plan.persistent.why_not_prefetch;
}

// A tile of a tensor the kernel also writes is copied where the program starts: an early copy of the next
// program's tile could miss this program's store to it.
TEST(PersistentGrid, ATileOfATensorTheKernelWritesIsNotPrefetched) {
  Config cfg;
  cfg.set("PERSISTENT", 1);
  cfg.set("num_warps", 4);
  KernelBuilder kb("in_place", cfg);
  Value a = kb.arg_ptr("a", f16), b = kb.arg_ptr("b", f16);
  Value n = kb.arg("N", i32);
  Value pid = program_id(0);
  Value ta = load(make_block_ptr(a, {n, 64}, {64, 1}, {pid * 64, 0}, {64, 64}, {1, 0}));
  Value tb = load(make_block_ptr(b, {n, 64}, {64, 1}, {0, 0}, {64, 64}, {1, 0}));
  store(make_block_ptr(a, {n, 64}, {64, 1}, {pid * 64, 0}, {64, 64}, {1, 0}), dot(ta, tb).to(f16));
  Planned p = plan_kernel(kb.finish(), "sm_80");
  ASSERT_TRUE(p.plan.persistent.on) << p.plan.persistent.why_not;
  ASSERT_EQ(p.plan.persistent.prefetches.size(), 1u) << "b's tile, which nothing writes";
  EXPECT_NE(p.plan.persistent.why_not_prefetch.find("the kernel may write the tensor it reads"), std::string::npos)
      << p.plan.persistent.why_not_prefetch;
}

// PERSISTENT=2 without a producer warpgroup: thread 0 draws the next id where a program starts, every thread reads
// it after a barrier at the program's end; the prefetch reads the same slot. The counter is the last parameter.
TEST(PersistentGrid, DynamicGridDrawsTheNextProgramOnceAProgram) {
  Planned p = plan_for("matmul", {{"PERSISTENT", 2}}, "sm_80");
  ASSERT_TRUE(p.plan.persistent.on) << p.plan.persistent.why_not;
  EXPECT_TRUE(p.plan.persistent.dynamic());
  const GeneratedKernel g = matmul_at({{"PERSISTENT", 2}}, "sm_80");
  EXPECT_TRUE(g.persistent_dynamic);
  EXPECT_EQ(g.persistent_ctas_per_sm, 2);
  EXPECT_NE(g.source.find(", int kiln_programs, int* kiln_program_counter)"), std::string::npos);
  EXPECT_EQ(occurrences(g.source, "kiln::draw_program(kiln_program_counter, kiln_programs)"), 1) << g.source;
  const size_t draw = g.source.find("kiln_drawn_program[kiln_turn & 1] = kiln::draw_program");
  const size_t next = g.source.find("kiln_program = kiln_drawn_program[kiln_turn & 1];");
  ASSERT_NE(draw, std::string::npos);
  ASSERT_NE(next, std::string::npos);
  EXPECT_LT(g.source.rfind("__syncthreads();", next), next);
  EXPECT_GT(g.source.rfind("__syncthreads();", next), draw) << "read after a barrier that follows the draw";
  EXPECT_NE(g.lowered.find("each draws its next program id from kiln_program_counter"), std::string::npos)
      << g.lowered;
  // The static grid's code has none of it.
  const GeneratedKernel s = matmul_at({{"PERSISTENT", 1}}, "sm_80");
  EXPECT_FALSE(s.persistent_dynamic);
  EXPECT_EQ(occurrences(s.source, "draw_program"), 0);
  EXPECT_EQ(occurrences(s.source, "kiln_program_counter"), 0);
  expect_nvrtc_compiles(g, "sm_80");
}

// With a producer warpgroup the producer draws and publishes each id in a two-slot ring; the consumers read it
// through kiln::warp_uniform (the key loops it bounds hold wgmma) and release the slot; where Q has one buffer, the
// consumers' prefetch of the next program's Q waits for the next slot, and where it has two the producer copies it. The producer's first warp runs the loop and lane 0 issues the copies, in
// 32 registers. No spill at the warp-specialised FA2 tiles the space offers at D = 128, causal or not. (At D = 64
// they compile and spill 4-8 bytes; 12-20 when the producer had a cp.async path and 56 registers: worklog §77.)
TEST(PersistentGrid, DynamicGridHandsTheProducersIdsToTheConsumers) {
  for (auto [block_m, warps, blocks, late, d] : {std::tuple{128, 8, 1, 1, 128}, std::tuple{128, 8, 1, 0, 128},
                                                 std::tuple{128, 8, 1, 0, 64}, std::tuple{64, 4, 2, 0, 64}})
    for (int causal : {0, 1}) {
      const KernelDef& def = builtin_kernels().find("fa2_fwd");
      std::map<std::string, int64_t> o = {{"BLOCK_M", block_m}, {"BLOCK_N", 128},      {"HEAD_DIM", d},
                                          {"CAUSAL", causal},   {"num_warps", warps}, {"MIN_BLOCKS_PER_SM", blocks},
                                          {"WARP_SPECIALIZE", 1}, {"LAST_PRODUCT_LATE", late},
                                          {"num_stages", 2 + late}, {"PERSISTENT", 2}};
      const Config c = def.with_overrides(def.default_config(), o);
      SCOPED_TRACE(c.str());
      const GeneratedKernel g = generate_cuda(def.build(c), Target::parse("sm_90a"));
      ASSERT_TRUE(g.why_not_warp_specialized.empty()) << g.why_not_warp_specialized;
      ASSERT_TRUE(g.persistent_dynamic) << g.why_not_persistent;
      EXPECT_EQ(occurrences(g.source, "kiln::draw_program(kiln_program_counter, kiln_programs)"), 1) << g.source;
      EXPECT_NE(g.source.find("const int kiln_program = kiln::warp_uniform(kiln_program_ring[kiln_turn & 1]);"),
                std::string::npos);
      EXPECT_NE(g.source.find("if (threadIdx.x < " + std::to_string(32 * warps + 32) + ") {"), std::string::npos);
      EXPECT_NE(g.source.find("if (kiln_ptid == 0) {"), std::string::npos);
      // The id ring's empty barrier counts every consumer thread and every producer thread that reads the id.
      EXPECT_NE(g.source.find(fmt::format("kiln_program_empty[s]), {});", 32 * warps + 32)), std::string::npos);
      EXPECT_NE(g.lowered.find("setmaxnreg: producer 32 registers"), std::string::npos) << g.lowered;
      if (g.producer_tile_maps == 0) { // Q in one buffer (three stages at D = 128): the consumers copy it
        const size_t next = g.source.find("the next program's tile of");
        ASSERT_NE(next, std::string::npos);
        EXPECT_NE(g.source.find("kiln_program_full[(kiln_turn + 1) & 1]", next), std::string::npos);
      } else { // the producer copies it into the turn's buffer once it has the id (codegen/plan_producer_tiles.h)
        EXPECT_EQ(g.source.find("the next program's tile of"), std::string::npos);
        EXPECT_NE(g.source.find("// producer: the tile of"), std::string::npos);
      }
      std::string why;
      if (!rt::nvrtc_available(&why))
        GTEST_SKIP() << "NVRTC not available: " << why;
      if (d == 128)
        expect_compiles_without_spills(g, "sm_90a");
      else
        expect_nvrtc_compiles(g, "sm_90a");
    }
}

} // namespace
} // namespace kiln_test
