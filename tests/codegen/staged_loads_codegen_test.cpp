// A streaming loop's register block loads staged through a shared ring (assign_layouts' find_pipelined_loads,
// SharedTile::to_registers): with num_stages >= 2, the two loads of tests/chunked_row_dot_kernel.h become ring
// tiles of their loop, copied by cp.async (never TMA: the reason is in the plan), read into their register
// layouts where the loop loads them (16-byte reads of shared memory where the layout holds whole chunks); with
// one stage nothing is staged, and a loop that also feeds a dot keeps its register loads as they were. The
// generated CUDA compiles with NVRTC on both archs without spilling.
#include "chunked_row_dot_kernel.h"

#include "codegen/describe_plan.h"
#include "nvrtc_compile.h"
#include "planned_kernel.h"

#include <gtest/gtest.h>

using namespace kiln;
using kiln_test::ChunkedRowDot;
using kiln_test::plan_kernel;
using kiln_test::Planned;

namespace {

class StagedLoads : public ::testing::TestWithParam<ChunkedRowDot> {};

TEST_P(StagedLoads, AStreamingLoopsLoadsAreRingTilesReadIntoRegisters) {
  const ChunkedRowDot& c = GetParam();
  for (const char* arch : {"sm_80", "sm_90a"}) {
    SCOPED_TRACE(arch);
    const Planned p = plan_kernel(kiln_test::chunked_row_dot_kernel(c), arch);
    const std::string lowered = describe_plan(p.kernel, p.plan);
    const std::vector<const Op*> loads = kiln_test::ops_of(p.kernel, OpKind::LoadBlock);
    const std::vector<const Op*> loops = kiln_test::ops_of(p.kernel, OpKind::For);
    ASSERT_EQ(loads.size(), 2u);
    ASSERT_EQ(loops.size(), 1u);
    for (const Op* l : loads)
      EXPECT_EQ(p.plan.where(l->result()), Placement::Registers) << "the loads' values stay in registers";
    if (c.num_stages < 2) {
      EXPECT_TRUE(p.plan.tiles.empty()) << lowered;
      EXPECT_FALSE(p.plan.pipelined.count(loops[0])) << lowered;
      continue;
    }
    ASSERT_TRUE(p.plan.pipelined.count(loops[0])) << lowered;
    EXPECT_EQ(p.plan.pipelined.at(loops[0]), loads);
    ASSERT_EQ(p.plan.tiles.size(), 2u);
    for (const Op* l : loads) {
      const SharedTile& t = p.plan.tiles[p.plan.tile_of.at(l->result())];
      EXPECT_TRUE(t.to_registers);
      EXPECT_EQ(t.stages, c.num_stages);
      EXPECT_EQ(t.loop(), loops[0]);
      EXPECT_EQ(t.rows * t.cols, c.rows * c.chunk);
    }
    EXPECT_FALSE(p.plan.tma.loops.count(loops[0])) << lowered;
    EXPECT_NE(lowered.find("read into registers where the loop loads it"), std::string::npos) << lowered;
    if (std::string(arch) == "sm_90a") {
      EXPECT_NE(lowered.find("the tile is read into registers (a streaming loop's staged load)"), std::string::npos)
          << lowered;
    }
    const GeneratedKernel g = generate_cuda(p.kernel, Target::parse(arch));
    // A row-major tile read in row-major registers holds whole 16-byte chunks: one ld.shared.v4 each.
    EXPECT_NE(g.source.find("ld.shared.v4.b32"), std::string::npos);
    EXPECT_NE(g.source.find("kiln::cp_async_16"), std::string::npos);
    kiln_test::expect_compiles_without_spills(g, arch);
  }
}

INSTANTIATE_TEST_SUITE_P(cases, StagedLoads,
                         ::testing::ValuesIn(kiln_test::chunked_row_dot_cases()),
                         [](const auto& info) { return kiln_test::label(info.param); });

// The column-major y tile's contiguous dim is the rows: its register layout (row-major, the kernel's other
// tile's) holds single elements along it, so it is read from the ring element by element.
TEST(StagedLoads, AColumnMajorTileIsReadElementByElement) {
  const Planned p = plan_kernel(kiln_test::chunked_row_dot_kernel({DType::f16, 16, 64, 4, 3, true}), "sm_80");
  const std::vector<const Op*> loads = kiln_test::ops_of(p.kernel, OpKind::LoadBlock);
  ASSERT_EQ(loads.size(), 2u);
  EXPECT_EQ(p.plan.tiles[p.plan.tile_of.at(loads[1]->result())].contig_dim, 0);
  const std::string source = generate_cuda(p.kernel, Target::parse("sm_80")).source;
  EXPECT_NE(source.find("*reinterpret_cast<const kiln::f16*>(kiln_smem +"), std::string::npos);
}

// A loop whose loads feed a dot keeps its operand ring; its register loads are not staged beside it (matmul
// with a bias tile loaded in the loop).
TEST(StagedLoads, ALoopWithADotStagesOnlyItsOperands) {
  Config config;
  config.num_warps = 4;
  config.num_stages = 3;
  KernelBuilder kb("matmul_with_a_register_load", config);
  Value a = kb.arg_ptr("a", f16), b = kb.arg_ptr("b", f16), e = kb.arg_ptr("e", f16), c = kb.arg_ptr("c", f32);
  Value n = kb.arg("n", i32);
  Value ap = make_block_ptr(a, {n, n}, {n, 1}, {0, 0}, {64, 32}, {1, 0});
  Value bp = make_block_ptr(b, {n, n}, {n, 1}, {0, 0}, {32, 64}, {1, 0});
  Value ep = make_block_ptr(e, {n, n}, {n, 1}, {0, 0}, {64, 64}, {1, 0});
  Value acc = zeros({64, 64}, f32);
  for_range(0, n, 32, [&](Value) {
    Value a_tile = load(ap, BoundaryCheck{0, 1});
    Value b_tile = load(bp, BoundaryCheck{0, 1});
    Value extra = load(ep).to(f32); // the third load
    acc = dot(a_tile, b_tile, acc) + extra;
    ap = advance(ap, {0, 32});
    bp = advance(bp, {32, 0});
    ep = advance(ep, {0, 64});
  });
  store(make_block_ptr(c, {n, n}, {n, 1}, {0, 0}, {64, 64}, {1, 0}), acc);
  const Planned p = plan_kernel(kb.finish(), "sm_80");
  const std::vector<const Op*> loads = kiln_test::ops_of(p.kernel, OpKind::LoadBlock);
  ASSERT_EQ(loads.size(), 3u);
  EXPECT_EQ(p.plan.where(loads[2]->result()), Placement::Registers);
  EXPECT_FALSE(p.plan.tile_of.count(loads[2]->result())) << describe_plan(p.kernel, p.plan);
  ASSERT_EQ(p.plan.tiles.size(), 2u);
  for (const SharedTile& t : p.plan.tiles)
    EXPECT_FALSE(t.to_registers);
}

} // namespace
