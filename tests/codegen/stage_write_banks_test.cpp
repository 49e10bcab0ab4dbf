// How the threads write a block to a bulk-reduction stage (codegen/stage_write_banks.h): in 8-byte pairs where two
// registers are neighbouring columns, and, where the lanes of one store would meet on the same banks (a wgmma
// accumulator's rows in a stage whose rows are whole bank cycles: the fused backward's dQ), in an order rotated by
// lane, so that one warp's stores take the fewest wavefronts. Checked on the plan, on the bank model against a count
// made here, and on the generated code; the rotation only reorders, so every lane still writes each register once.
#include "codegen/codegen.h"
#include "codegen/operand_layouts.h"
#include "codegen/planned_kernel.h"
#include "source_text.h"
#include "codegen/stage_write_banks.h"
#include "nvrtc_compile.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

namespace kiln_test {
namespace {

// The fused dK/dV tile whose dQ adds go through the stage: 128 keys over two consumer warpgroups, D = 64.
std::map<std::string, int64_t> fused_dkdv(int64_t head_dim) {
  return {{"HEAD_DIM", head_dim}, {"ATOMIC_DQ", 1},  {"WARP_SPECIALIZE", 1},
          {"BLOCK_M", 64},        {"BLOCK_N", 128}, {"num_warps", 8}};
}

// Its stage as bulk reductions read it, rows back to back (by TMA the stage is swizzled: tma_reductions_test.cpp).
CodegenOptions by_bulk_reductions(bool rotated = true) {
  CodegenOptions o;
  o.tma_reductions = false;
  o.rotated_stage_writes = rotated;
  return o;
}

// The (row, col) lane `lane` writes register `r` to in `L` (lane and register bases only).
std::pair<int64_t, int64_t> element(const Layout& L, int lane, int r) {
  const Coord e = L.element(r, lane);
  return {e[0], e[1]};
}

// One warp's wavefronts counted here, independently of the planner: each store, the most distinct words any
// bank receives.
int64_t count_wavefronts(const Layout& L, const StageWrites& w, int64_t row_stride) {
  int64_t total = 0;
  for (int j = 0; j < L.num_regs(); j += w.vector) {
    std::map<int64_t, std::set<int64_t>> bank;
    for (int lane = 0; lane < 32; ++lane) {
      int rot = 0;
      for (int b = 0; b < 5; ++b)
        if ((lane >> b) & 1)
          rot ^= w.lane_masks[static_cast<size_t>(b)];
      const auto [row, col] = element(L, lane, j ^ rot);
      for (int e = 0; e < w.vector; ++e)
        bank[(row * row_stride + col + e) % 32].insert(row * row_stride + col + e);
    }
    int64_t most = 0;
    for (const auto& [b, words] : bank)
      most = std::max<int64_t>(most, static_cast<int64_t>(words.size()));
    total += most;
  }
  return total;
}

TEST(StageWriteBanks, TheFusedBackwardsDqRowsShareBanksAndRotatedLanesSpreadThem) {
  Planned p = plan_for("fa2_bwd_dkdv", fused_dkdv(64), "sm_90a", by_bulk_reductions());
  ASSERT_TRUE(p.plan.bulk.any());
  for (const auto& [op, b] : p.plan.bulk.ops) {
    const StageWrites& w = b.writes;
    EXPECT_EQ(b.cols, 64);
    EXPECT_EQ(w.vector, 2) << "a wgmma accumulator's registers 2i, 2i + 1 are neighbouring columns";
    EXPECT_TRUE(w.rotated()) << w.str();
    // In order the eight rows of a lane column meet on the same banks: each 256-byte store takes 8 wavefronts.
    // Rotated, 2 (the fewest for 32 lanes x 8 bytes), over the 8 stores of 16 registers.
    EXPECT_EQ(w.wavefronts_plain, 8 * 8);
    EXPECT_EQ(w.wavefronts, 8 * 2);
    const Layout L = access_layout(p.kernel, p.plan, *op);
    EXPECT_EQ(count_wavefronts(L, w, b.cols), w.wavefronts);
    EXPECT_EQ(count_wavefronts(L, StageWrites{w.vector, std::vector<int>(5, 0), 0, 0, {}, {}}, b.cols), w.wavefronts_plain);
    // Each lane's order is a permutation of its registers, so the warp writes the same elements, each once.
    for (int lane = 0; lane < 32; ++lane) {
      int rot = 0;
      for (int bit = 0; bit < 5; ++bit)
        if ((lane >> bit) & 1)
          rot ^= w.lane_masks[static_cast<size_t>(bit)];
      EXPECT_EQ(rot & 1, 0) << "the masks leave the pair's own bit alone";
      std::set<std::pair<int64_t, int64_t>> rotated, plain;
      for (int r = 0; r < L.num_regs(); ++r) {
        rotated.insert(element(L, lane, r ^ rot));
        plain.insert(element(L, lane, r));
      }
      EXPECT_EQ(rotated, plain);
      EXPECT_EQ(plain.size(), static_cast<size_t>(L.num_regs()));
    }
  }
}

TEST(StageWriteBanks, ARotationIsKeptOnlyWhereItSavesWavefronts) {
  // Lanes along the contiguous dim: a warp's store already covers 32 banks in order.
  const Layout blocked = blocked_layout({64, 64}, 4, 2);
  const StageWrites w = plan_stage_writes(blocked, 0, 1, 64, /*rotate=*/true);
  EXPECT_EQ(w.vector, 2);
  EXPECT_FALSE(w.rotated()) << w.str();
  EXPECT_EQ(w.wavefronts, w.wavefronts_plain);
  EXPECT_EQ(count_wavefronts(blocked, w, 64), w.wavefronts);
  // Register bit 0 along the rows: single stores.
  const Layout by_rows = blocked_layout({64, 64}, 4, 2, {0, 1});
  EXPECT_EQ(plan_stage_writes(by_rows, 0, 1, 64, true).vector, 1);
}

TEST(StageWriteBanks, TheGeneratedCodeRotatesByLaneAndTheSwitchTurnsItOff) {
  const KernelDef& def = builtin_kernels().find("fa2_bwd_dkdv");
  const Kernel k = def.build(def.with_overrides(def.default_config(), fused_dkdv(64)));
  const GeneratedKernel on = generate_cuda(k, Target::parse("sm_90a"), by_bulk_reductions());
  const GeneratedKernel off = generate_cuda(k, Target::parse("sm_90a"), by_bulk_reductions(/*rotated=*/false));
  EXPECT_TRUE(has(on.source, "const int kiln_rot = ")) << "each lane's order from its lane bits";
  EXPECT_TRUE(has(on.source, "? ")) << "registers permuted by selects";
  EXPECT_TRUE(has(on.lowered, "each lane's registers rotated by lane bit 2 (register ^ 4) lane bit 3 (register ^ 8): "
                              "16 shared-memory wavefronts a warp (64 in order)"))
      << on.lowered;
  EXPECT_FALSE(has(off.source, "kiln_rot"));
  EXPECT_TRUE(has(off.lowered, "8-byte stores: 64 shared-memory wavefronts a warp")) << off.lowered;
  for (const GeneratedKernel* g : {&on, &off})
    EXPECT_TRUE(has(g->source, "*reinterpret_cast<float2*>(&kiln_stage["));
  expect_nvrtc_compiles(on, "sm_90a");
}

} // namespace
} // namespace kiln_test
