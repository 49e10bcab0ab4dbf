// A register tile staged as a wgmma operand by stmatrix (codegen/stmatrix_store.h): which layouts qualify, plain or
// transposed, and that the addresses the emitter gives each lane put every register's element where the layout
// says it belongs (simulated here from the instruction's definition in the PTX ISA); then the fused backward's dS,
// staged for dQ's product, in the generated code.
#include "codegen/codegen.h"
#include "codegen/planned_kernel.h"
#include "source_text.h"
#include "codegen/stmatrix_store.h"
#include "nvrtc_compile.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

namespace kiln_test {
namespace {

using Element = std::pair<int64_t, int64_t>;

Element element_of(const Layout& L, int warp, int lane, int r) {
  const Coord e = L.element(r, lane, warp);
  return {e[0], e[1]};
}

// Where stmatrix puts each register of each lane of `warp`, with the addresses the emitter computes
// (Emitter::emit_stmatrix_stores): lane l names row l % 8 of matrix (l / 8) % matrices at the coordinates of its
// register pair without the lane's part. Per the ISA, lane l's register of matrix m holds row l / 4, elements
// 2(l % 4) and 2(l % 4) + 1; .trans stores them in column l / 4, rows 2(l % 4) and 2(l % 4) + 1.
std::map<std::pair<int, int>, Element> simulate(const Layout& L, const StmatrixStore& st, int warp) {
  std::map<std::pair<int, int>, Element> placed; // (lane, register) -> element
  for (int j = 0; j < st.instructions; ++j) {
    Element row_start[4][8];
    for (int l = 0; l < 32; ++l) {
      const int m = (l >> 3) % st.matrices, r = 2 * (j * st.matrices + m);
      const Element pair = element_of(L, warp, 0, r);
      row_start[m][l & 7] = {pair.first + (l & 7), pair.second};
    }
    for (int m = 0; m < st.matrices; ++m)
      for (int l = 0; l < 32; ++l)
        for (int h = 0; h < 2; ++h) {
          const int row = st.trans ? 2 * (l % 4) + h : l / 4, col = st.trans ? l / 4 : 2 * (l % 4) + h;
          const Element start = row_start[m][row];
          placed[{l, 2 * (j * st.matrices + m) + h}] = {start.first, start.second + col};
        }
  }
  return placed;
}

void expect_every_register_in_place(const Layout& L, const StmatrixStore& st) {
  for (int warp = 0; warp < (1 << L.warp.size()); ++warp) {
    const auto placed = simulate(L, st, warp);
    ASSERT_EQ(placed.size(), static_cast<size_t>(32 * L.num_regs()));
    for (const auto& [lane_reg, at] : placed)
      EXPECT_EQ(at, element_of(L, warp, lane_reg.first, lane_reg.second))
          << "warp " << warp << " lane " << lane_reg.first << " register " << lane_reg.second;
  }
}

TEST(StmatrixStore, AnAccumulatorIsStoredAsItIsAndItsTransposeByTrans) {
  const Layout acc = mma_acc_layout(64, 128, WarpSplit{4, 2, 8});
  const std::optional<StmatrixStore> plain = stmatrix_store(acc, 2);
  ASSERT_TRUE(plain);
  EXPECT_FALSE(plain->trans);
  EXPECT_EQ(plain->matrices, 4);
  EXPECT_EQ(plain->instructions, acc.num_regs() / 8);
  expect_every_register_in_place(acc, *plain);

  // dSᵀ's accumulator read as dS (the fused backward's dQ = dS K): its lanes run along the rows.
  const Layout ds = trans_layout(mma_acc_layout(128, 64, WarpSplit{8, 1, 8}));
  const std::optional<StmatrixStore> trans = stmatrix_store(ds, 2);
  ASSERT_TRUE(trans);
  EXPECT_TRUE(trans->trans);
  EXPECT_EQ(trans->str(), "4 stmatrix.x4.trans a thread");
  expect_every_register_in_place(ds, *trans);

  // Four register pairs a thread: one x4 instruction; two: one x2.
  const Layout small = mma_acc_layout(16, 16, WarpSplit{1, 1, 1});
  const std::optional<StmatrixStore> x4 = stmatrix_store(small, 2);
  ASSERT_TRUE(x4);
  EXPECT_EQ(x4->matrices, 4);
  EXPECT_EQ(x4->instructions, 1);
  const Layout smaller = mma_acc_layout(16, 8, WarpSplit{1, 1, 1});
  const std::optional<StmatrixStore> one = stmatrix_store(smaller, 2);
  ASSERT_TRUE(one);
  EXPECT_EQ(one->matrices, 2);
  EXPECT_EQ(one->instructions, 1);
  expect_every_register_in_place(smaller, *one);
}

TEST(StmatrixStore, OtherLayoutsAndWiderElementsKeepScalarStores) {
  EXPECT_FALSE(stmatrix_store(mma_acc_layout(64, 128, WarpSplit{4, 2, 8}), 4)) << "f32: no b16 matrices";
  EXPECT_FALSE(stmatrix_store(blocked_layout({64, 64}, 4, 8), 2));
  EXPECT_FALSE(stmatrix_store(blocked_layout({64, 64}, 4, 2, {0, 1}), 2));
}

TEST(StmatrixStore, TheFusedBackwardStagesDsForDqByTransposedMatrices) {
  const KernelDef& def = builtin_kernels().find("fa2_bwd_dkdv");
  const Kernel k = def.build(def.with_overrides(
      def.default_config(),
      {{"HEAD_DIM", 64}, {"ATOMIC_DQ", 1}, {"WARP_SPECIALIZE", 1}, {"BLOCK_M", 64}, {"BLOCK_N", 128}, {"num_warps", 8}}));
  const GeneratedKernel g = generate_cuda(k, Target::parse("sm_90a"));
  EXPECT_TRUE(has(g.lowered, "A registers, staged as a K-major shared operand tile in the scratch by 4 "
                             "stmatrix.x4.trans a thread"))
      << g.lowered;
  EXPECT_TRUE(has(g.source, "kiln::stmatrix_x4<true>(kiln::smem_u32(kiln_smem) + "));
  expect_nvrtc_compiles(g, "sm_90a");
}

} // namespace
} // namespace kiln_test
