// TMA reductions (plan_bulk_reductions, CodegenOptions::tma_reductions): in a warp-specialised sm_90a kernel a staged
// f32 atomic_add (the fused backward's dQ) is written to a stage in kiln's swizzled shared format and added to the
// tensor by one TMA tensor reduction a 128-byte panel, through a map of the block pointer's tensor. Checked on the
// plan (the map as data, the panels, the stage's alignment), on the stage writes' places against the shared format
// computed here, on the generated code, and on ptxas: the path is there to take the rotated writes' selects and
// registers away, so its kernels must not spill. Elsewhere the bulk reductions stay, and the plan says why.
#include "codegen/codegen.h"
#include "codegen/operand_layouts.h"
#include "codegen/planned_kernel.h"
#include "nvrtc_compile.h"
#include "source_text.h"

#include <gtest/gtest.h>

#include <map>
#include <set>

namespace kiln_test {
namespace {

// The fused dK/dV tile the tuner picks at D = 128: 128 keys over two consumer warpgroups, 64 query rows a step.
std::map<std::string, int64_t> fused_dkdv(int64_t head_dim, int64_t block_m = 64) {
  return {{"HEAD_DIM", head_dim}, {"ATOMIC_DQ", 1},  {"WARP_SPECIALIZE", 1},          {"BLOCK_M", block_m},
          {"BLOCK_N", 128},       {"num_warps", 8}, {"PRODUCTS_IN_ORDER", block_m == 128}};
}

// Where the shared format puts f32 element (row, col) of a rows x cols stage, counted here: 128-byte panels of 32
// columns one after the other, a row's 16-byte chunks XORed with its row modulo 8.
int64_t shared_format_byte(int64_t rows, int64_t row, int64_t col) {
  const int64_t panel = col / 32, chunk = (col % 32) / 4;
  return panel * rows * 128 + row * 128 + (chunk ^ (row % 8)) * 16 + (col % 4) * 4;
}

TEST(TmaReductions, TheFusedBackwardsDqGoesOutByTmaOneReductionAPanel) {
  for (int64_t d : {64, 128}) {
    SCOPED_TRACE(d);
    Planned p = plan_for("fa2_bwd_dkdv", fused_dkdv(d), "sm_90a");
    ASSERT_TRUE(p.plan.bulk.any());
    const BulkReductions& b = p.plan.bulk;
    EXPECT_EQ(b.stage_offset % 1024, 0) << "a 128-byte swizzle's period";
    EXPECT_EQ(b.stage_bytes % 1024, 0) << "so is the second stage's";
    EXPECT_EQ(b.stages, 2);
    std::set<int> maps;
    for (const auto& [op, r] : b.ops) {
      ASSERT_TRUE(r.by_tma()) << r.why_not_tma;
      EXPECT_EQ(r.rows, 64);
      EXPECT_EQ(r.cols, d);
      EXPECT_EQ(r.panel_elems(), 32);
      EXPECT_EQ(r.panels(), d / 32);
      maps.insert(r.map);
      const TensorMapParam& m = p.plan.tma.maps.at(static_cast<size_t>(r.map));
      EXPECT_EQ(m.base_param, param_index(p.kernel, "DQ_ACC"));
      EXPECT_EQ(m.dtype, DType::f32);
      EXPECT_EQ(m.box, (std::vector<int64_t>{64, 32}));
      EXPECT_EQ(m.order, (std::vector<int>{1, 0}));
      EXPECT_EQ(m.swizzle, SwizzleMode::Bytes128);

      // The writes: 8-byte pairs at the lane's offset with constants a register, no rotation; each register's place
      // is the shared format's, and one warp's stores take the fewest wavefronts (2 for 32 lanes x 8 bytes).
      const StageWrites& w = r.writes;
      EXPECT_EQ(w.vector, 2);
      EXPECT_FALSE(w.rotated()) << w.str();
      ASSERT_TRUE(w.by_register_bits()) << w.str();
      const Layout L = access_layout(p.kernel, p.plan, *op);
      EXPECT_EQ(w.wavefronts, 2 * L.num_regs() / 2);
      for (int warp = 0; warp < (1 << L.warp.size()); ++warp)
        for (int lane = 0; lane < 32; ++lane) {
          const Coord e0 = L.element(0, lane, warp);
          const int64_t at = shared_format_byte(r.rows, e0[0], e0[1]);
          for (int reg = 0; reg < L.num_regs(); reg += 2) {
            int64_t x = 0, a = 0;
            for (size_t bit = 0; bit < L.reg.size(); ++bit)
              if ((reg >> bit) & 1) {
                x ^= w.chunk_xor[bit];
                a += w.byte_add[bit];
              }
            const Coord e = L.element(reg, lane, warp);
            ASSERT_EQ((at ^ x) + a, shared_format_byte(r.rows, e[0], e[1])) << "lane " << lane << " register " << reg;
          }
        }
    }
    EXPECT_EQ(maps.size(), b.ops.size()) << "one map a make_block_ptr";

    const GeneratedKernel g = generate_cuda(p.kernel, Target::parse("sm_90a"));
    EXPECT_TRUE(has(g.lowered, "one TMA reduction a 128-byte panel through kiln_map")) << g.lowered;
    const int reductions = occurrences(g.source, "kiln::tma_reduce_add_") - 4; // past the prelude's four
    EXPECT_GT(reductions, 0);
    EXPECT_EQ(reductions % (d / 32), 0) << "one a panel of each add emitted";
    EXPECT_TRUE(has(g.source, "kiln::st_shared_f32x2("));
    EXPECT_FALSE(has(g.source, "kiln_rot")) << "no rotated order";
    EXPECT_FALSE(has(g.source, "kiln::bulk_reduce_add(")) << "no bulk reduction, no bound check";
    EXPECT_EQ(g.tensor_maps.size(), p.plan.tma.maps.size());
    expect_compiles_without_spills(g, "sm_90a");
  }
}

// The launch whose maps are illegal runs the kernel generated without warp specialisation: bulk reductions there.
TEST(TmaReductions, TheIllegalMapsFallbackAddsByBulkReductions) {
  const KernelDef& def = builtin_kernels().find("fa2_bwd_dkdv");
  const Kernel k = def.build(def.with_overrides(def.default_config(), fused_dkdv(128)));
  const GeneratedKernel g = generate_cuda(k, Target::parse("sm_90a"));
  ASSERT_TRUE(g.illegal_maps_fallback);
  EXPECT_TRUE(has(g.source, "kiln::tma_reduce_add_"));
  EXPECT_FALSE(has(g.illegal_maps_fallback->source, "kiln::tma_reduce_add_"));
  EXPECT_TRUE(has(g.illegal_maps_fallback->source, "kiln::bulk_reduce_add("));
}

// Elsewhere the stage's rows lie as in the tensor and bulk reductions add them; the plan says why not by TMA.
TEST(TmaReductions, ElsewhereBulkReductionsAndThePlanSaysWhy) {
  CodegenOptions off;
  off.tma_reductions = false;
  CodegenOptions unswizzled;
  unswizzled.swizzle = false;
  std::map<std::string, int64_t> not_specialised = fused_dkdv(64);
  not_specialised["WARP_SPECIALIZE"] = 0;
  struct Case {
    const char* what;
    std::map<std::string, int64_t> config;
    CodegenOptions options;
    const char* arch;
    const char* why;
  };
  const std::vector<Case> cases = {
      {"switched off", fused_dkdv(64), off, "sm_90a", "TMA reductions are off"},
      {"unswizzled", fused_dkdv(64), unswizzled, "sm_90a", "not swizzled"},
      {"not specialised", not_specialised, {}, "sm_90a", "not warp-specialised"},
      {"sm_90", fused_dkdv(64), {}, "sm_90", "generated for sm_90a"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Planned p = plan_for("fa2_bwd_dkdv", c.config, c.arch, c.options);
    ASSERT_TRUE(p.plan.bulk.any());
    for (const auto& [op, r] : p.plan.bulk.ops) {
      EXPECT_FALSE(r.by_tma());
      EXPECT_TRUE(has(r.why_not_tma, c.why)) << r.why_not_tma;
      EXPECT_FALSE(r.writes.by_register_bits());
    }
    const GeneratedKernel g = generate_cuda(p.kernel, Target::parse(c.arch), c.options);
    EXPECT_TRUE(has(g.lowered, "(not by TMA: ")) << g.lowered;
    EXPECT_FALSE(has(g.source, "kiln::tma_reduce_add_"));
    EXPECT_TRUE(has(g.source, "kiln::bulk_reduce_add("));
  }
}

} // namespace
} // namespace kiln_test
