// Narrowed swizzle lines (codegen/choose_dot_lowering.h): a shared tile whose 128-byte lines keep a product off
// wgmma, because a warpgroup's slice of its N-major B is narrower than a line, is stored in lines of the slice's width. The fused
// backward's dQ = dS K at D = 64 over two warpgroups (32 columns, 64 bytes each) is the case it was built for: K's
// tile takes 64-byte lines, the product goes to wgmma, and K's other product (Sᵀ = K Qᵀ, K-major) stays on wgmma.
#include "codegen/codegen.h"
#include "codegen/wgmma.h"
#include "nvrtc_compile.h"
#include "planned_kernel.h"

#include <gtest/gtest.h>

using namespace kiln;

namespace {

std::map<std::string, int64_t> fused_tile(int64_t head_dim, bool ws) {
  return {{"HEAD_DIM", head_dim}, {"ATOMIC_DQ", 1},  {"BLOCK_N", 128},        {"BLOCK_M", 64},
          {"num_warps", 8},       {"WARP_SPECIALIZE", ws}};
}

// The dot whose B is K's tile and whose A is dSᵀ (dQ's product: 64 rows).
const Op& dq_product(const kiln_test::Planned& p) {
  for (const Op* dot : kiln_test::ops_of(p.kernel, OpKind::Dot))
    if (p.kernel.type(dot->result()).shape[0] == 64)
      return *dot;
  throw std::runtime_error("no 64-row product");
}

TEST(NarrowLines, TheFusedBackwardsDqProductGoesToWgmmaOnKsTileIn64ByteLines) {
  for (const bool ws : {false, true}) {
    SCOPED_TRACE(ws ? "warp-specialised" : "plain");
    kiln_test::Planned on = kiln_test::plan_for("fa2_bwd_dkdv", fused_tile(64, ws), "sm_90a");
    const Op& dq = dq_product(on);
    EXPECT_EQ(on.plan.dots.at(&dq).instruction, DotInstruction::Wgmma);
    SharedTile& k_tile = on.plan.tiles[on.plan.tile_of.at(dq.operands[1])];
    EXPECT_EQ(k_tile.line_cap, 64);
    EXPECT_EQ(k_tile.geometry().swizzle_mode(), SwizzleMode::Bytes64);
    { // the narrowing is what puts it there: in 128-byte lines wgmma refuses the product
      k_tile.line_cap = 128;
      std::string why;
      EXPECT_FALSE(dot_uses_wgmma(on.kernel, dq, on.plan, Target::parse("sm_90a"), CodegenOptions{}, &why));
      EXPECT_NE(why.find("not whole 128-byte lines"), std::string::npos) << why;
      k_tile.line_cap = 64;
    }
    int narrowed = 0, wgmma = 0, dots = 0;
    for (const SharedTile& t : on.plan.tiles)
      narrowed += t.line_cap < 128;
    for (const Op* dot : kiln_test::ops_of(on.kernel, OpKind::Dot)) {
      ++dots;
      wgmma += on.plan.dots.at(dot).instruction == DotInstruction::Wgmma;
    }
    EXPECT_EQ(narrowed, 1) << "K's tile only";
    EXPECT_EQ(wgmma, dots) << "every product on wgmma, K's Sᵀ = K Qᵀ among them";

    const GeneratedKernel g = generate_cuda(on.kernel, Target::parse("sm_90a"));
    EXPECT_NE(g.lowered.find("64-byte lines (a warpgroup's slice)"), std::string::npos) << g.lowered;
    EXPECT_NE(g.lowered.find("B shared N-major (LBO 8192 B, SBO 512 B, 64-byte swizzle)"), std::string::npos)
        << g.lowered;
    std::string why;
    if (!rt::nvrtc_available(&why))
      GTEST_SKIP() << "NVRTC not available: " << why;
    // Warp-specialised, ptxas spills 16 bytes since the fused kernel loads Delta beside LSE (240 registers a
    // consumer), which measured 13 % faster on an H200 (worklog §87); the plain tile spills nothing.
    const rt::CompiledKernel k = rt::compile_cuda(kiln_test::compile_request_for(g, "sm_90a"));
    EXPECT_LE(k.usage.spill_store_bytes, ws ? 16 : 0) << k.log;
    EXPECT_TRUE(rt::ptxas_product_advisories(k.log).empty()) << k.log; // setmaxnreg ignored, products serialised
  }
}

// Where every warpgroup's slice is whole lines already (D = 128: 64 columns, 128 bytes) or no product uses wgmma
// (sm_80), every tile keeps 128-byte lines.
TEST(NarrowLines, NothingChangesWhereNoProductNeedsIt) {
  for (const auto& [head_dim, arch] : {std::pair<int64_t, const char*>{128, "sm_90a"}, {64, "sm_80"}}) {
    SCOPED_TRACE(arch);
    const kiln_test::Planned p = kiln_test::plan_for("fa2_bwd_dkdv", fused_tile(head_dim, false), arch);
    for (const SharedTile& t : p.plan.tiles)
      EXPECT_EQ(t.line_cap, 128);
  }
}

} // namespace
