// plan_tma_copies (codegen/plan_tma_copies.h): which pipelined loops TMA copies, the tensor maps they read as
// data (what the launch rebuilds from its arguments), and the reason a loop stays on cp.async.
#include "codegen/codegen.h"
#include "codegen/planned_kernel.h"

#include <gtest/gtest.h>

namespace kiln_test {
namespace {

TEST(TmaCopies, MatmulOnSm90aCopiesBothTilesWithMapsOfItsArguments) {
  Planned p = plan_for("matmul", {}, "sm_90a");
  const TmaPlan& tma = p.plan.tma;
  ASSERT_EQ(tma.loops.size(), 1u);
  EXPECT_TRUE(tma.why_not.empty());
  ASSERT_EQ(tma.maps.size(), 2u);
  const Kernel& k = p.kernel;
  // A: make_block_ptr(A, {M, K}, {stride_am, stride_ak}, ..., {128, 32}, order {1, 0}): 64-byte lines.
  const TensorMapParam& a = tma.maps[0];
  EXPECT_EQ(a.base_param, param_index(k, "A"));
  EXPECT_EQ(a.shape[0].params, std::vector<int>{param_index(k, "M")});
  EXPECT_EQ(a.shape[1].params, std::vector<int>{param_index(k, "K")});
  EXPECT_EQ(a.strides[0].params, std::vector<int>{param_index(k, "stride_am")});
  EXPECT_EQ(a.strides[1].params, std::vector<int>{param_index(k, "stride_ak")});
  EXPECT_EQ(a.box, (std::vector<int64_t>{128, 32}));
  EXPECT_EQ(a.order, (std::vector<int>{1, 0}));
  EXPECT_EQ(a.swizzle, SwizzleMode::Bytes64);
  // B: 32 x 128 f16 is two 128-byte panels, one 32 x 64 box each.
  const TensorMapParam& b = tma.maps[1];
  EXPECT_EQ(b.base_param, param_index(k, "B"));
  EXPECT_EQ(b.box, (std::vector<int64_t>{32, 64}));
  EXPECT_EQ(b.swizzle, SwizzleMode::Bytes128);
  std::vector<const Op*> loads = ops_of(k, OpKind::LoadBlock);
  ASSERT_EQ(loads.size(), 2u);
  const TmaCopy& ca = tma.copies.at(loads[0]);
  const TmaCopy& cb = tma.copies.at(loads[1]);
  EXPECT_EQ(ca.map, 0);
  EXPECT_EQ(ca.panels, 1);
  EXPECT_EQ(ca.bytes_per_stage, 128 * 32 * 2);
  EXPECT_EQ(cb.map, 1);
  EXPECT_EQ(cb.panels, 2);
  EXPECT_EQ(cb.panel_elems, 64);
  EXPECT_EQ(cb.bytes_per_stage, 32 * 128 * 2);
}

TEST(TmaCopies, AColumnMajorOperandIsReadInItsOwnOrder) {
  Planned p = plan_for("matmul", {{"A_COL_MAJOR", 1}, {"BLOCK_K", 64}}, "sm_90a");
  ASSERT_EQ(p.plan.tma.maps.size(), 2u);
  const TensorMapParam& a = p.plan.tma.maps[0];
  EXPECT_EQ(a.order, (std::vector<int>{0, 1}));
  // M (dim 0) is contiguous: a 128-row block is two 64-element panels.
  EXPECT_EQ(a.box, (std::vector<int64_t>{64, 64}));
  EXPECT_EQ(p.plan.tma.copies.at(ops_of(p.kernel, OpKind::LoadBlock)[0]).panels, 2);
}

// FA2's K and V bases are per (batch, head): k + off_b * stride_kb + off_hkv * stride_kh. Each term is one more
// dim of the map (box 1), so both key loops copy by TMA through two 4-D maps over the whole tensors.
TEST(TmaCopies, AttentionMapsCoverEveryHeadWithPerProgramDims) {
  Planned p = plan_for("fa2_fwd", {{"BLOCK_M", 128}, {"BLOCK_N", 64}, {"HEAD_DIM", 128}}, "sm_90a");
  const TmaPlan& tma = p.plan.tma;
  EXPECT_TRUE(tma.why_not.empty()) << tma.why_not.begin()->second;
  ASSERT_EQ(tma.loops.size(), 2u); // the unmasked and the masked key loops, a ring each
  ASSERT_EQ(tma.maps.size(), 2u);  // K and V, shared by both loops
  const Kernel& k = p.kernel;
  for (const std::string t : {"K", "V"}) {
    const TensorMapParam* m = nullptr;
    for (const TensorMapParam& x : tma.maps)
      if (x.base_param == param_index(k, t))
        m = &x;
    ASSERT_NE(m, nullptr) << t;
    EXPECT_EQ(m->box, (std::vector<int64_t>{64, 64})) << t; // 64 keys x a 128-byte line of the 256-byte rows
    const std::vector<int> order = t == "K" ? std::vector<int>{0, 1} : std::vector<int>{1, 0}; // Kᵀ: D contiguous
    EXPECT_EQ(m->order, order);
    ASSERT_EQ(m->outer.size(), 2u) << t;
    const std::string s = t == "K" ? "k" : "v";
    EXPECT_EQ(m->outer[0].stride.params, std::vector<int>{param_index(k, "stride_" + s + "b")});
    EXPECT_EQ(m->outer[1].stride.params, std::vector<int>{param_index(k, "stride_" + s + "h")});
    // Both coordinates come from program_id(1) (< 65535) by division and remainder.
    for (const OuterDim& o : m->outer)
      EXPECT_EQ(o.extent, 65535);
  }
  for (const auto& [load, c] : tma.copies)
    EXPECT_EQ(c.panels, 2);
  GeneratedKernel g = generate_cuda(p.kernel, Target::parse("sm_90a"));
  EXPECT_NE(g.source.find("kiln::tma_load_4d("), std::string::npos);
  EXPECT_NE(g.lowered.find("per-program dims at %"), std::string::npos) << g.lowered;
}

TEST(TmaCopies, NothingOnTargetsWithoutTmaOrWithTheSwitchOff) {
  Planned ampere = plan_for("matmul", {}, "sm_80");
  EXPECT_FALSE(ampere.plan.tma.any());
  EXPECT_TRUE(ampere.plan.tma.why_not.empty()); // nothing to say where TMA does not exist
  CodegenOptions off;
  off.tma = false;
  Planned p = plan_for("matmul", {}, "sm_90a", off);
  EXPECT_FALSE(p.plan.tma.any());
  ASSERT_EQ(p.plan.tma.why_not.size(), 1u);
  EXPECT_EQ(p.plan.tma.why_not.begin()->second, "CodegenOptions::tma is off");
}

TEST(TmaCopies, GeneratedKernelTakesOneMapParameterEachAndTheSwitch) {
  const KernelDef& def = builtin_kernels().find("matmul");
  GeneratedKernel g = generate_cuda(def.build(def.default_config()), Target::parse("sm_90a"));
  ASSERT_EQ(g.tensor_maps.size(), 2u);
  EXPECT_NE(g.source.find("const __grid_constant__ kiln::TensorMap kiln_map1, int kiln_tma)"), std::string::npos);
  GeneratedKernel ampere = generate_cuda(def.build(def.default_config()), Target::parse("sm_80"));
  EXPECT_TRUE(ampere.tensor_maps.empty());
  EXPECT_EQ(ampere.source.find("kiln_tma"), std::string::npos);
}

} // namespace
} // namespace kiln_test
