// plan_exp2_on_fma (codegen/plan_exp2_on_fma.h): which f32 exp2 tiles have one register in every K computed
// by the FMA pipe's polynomial (EXP2_ON_FMA=K), how the emitter prints the choice, that the result compiles
// without spills, and why a kernel without such a tile keeps its code.
#include "codegen/codegen.h"
#include "codegen/planned_kernel.h"
#include "codegen/source_text.h"
#include "dsl/dsl.h"
#include "nvrtc_compile.h"

#include <gtest/gtest.h>

namespace kiln_test {
namespace {

// FA2's 64-row warp-specialised tile, two CTAs an SM: P = exp2(..) is 64 x 128 over 128 threads (64
// registers), alpha = exp2(m_old - m_new) a 64-vector (2 registers a thread).
std::map<std::string, int64_t> fa2_ws64(int64_t every) {
  return {{"HEAD_DIM", 64},       {"BLOCK_M", 64},   {"BLOCK_N", 128},         {"num_warps", 4},
          {"WARP_SPECIALIZE", 1}, {"num_stages", 2}, {"MIN_BLOCKS_PER_SM", 2}, {"EXP2_ON_FMA", every}};
}

GeneratedKernel fa2_generated(const std::map<std::string, int64_t>& overrides, const std::string& arch) {
  const KernelDef& def = builtin_kernels().find("fa2_fwd");
  return generate_cuda(def.build(def.with_overrides(def.default_config(), overrides)), Target::parse(arch));
}

// The exp2 of P in each key loop is split; alpha's 2 registers a thread are fewer than 4, so it stays whole,
// and with K = 2 it is split too.
TEST(Exp2OnFma, Fa2SplitsEachKeyLoopsExponentialOfP) {
  for (const char* arch : {"sm_80", "sm_90a"}) {
    SCOPED_TRACE(arch);
    Planned p = plan_for("fa2_fwd", fa2_ws64(4), arch);
    const Exp2OnFma& e = p.plan.exp2_on_fma;
    EXPECT_EQ(e.every, 4);
    EXPECT_TRUE(e.why_not.empty()) << e.why_not;
    ASSERT_EQ(e.ops.size(), 2u);
    for (const Op* op : e.ops) {
      EXPECT_EQ(op->unary, UnaryOp::Exp2);
      EXPECT_EQ(p.kernel.type(op->result()).shape.size(), 2u) << "P, not alpha";
      EXPECT_GE(p.plan.layout.at(op->result()).num_regs(), 4);
    }
    EXPECT_EQ(plan_for("fa2_fwd", fa2_ws64(2), arch).plan.exp2_on_fma.ops.size(), 4u) << "alpha too";
  }
}

TEST(Exp2OnFma, EveryKthRegisterTakesThePolynomialAndTheResultCompiles) {
  const GeneratedKernel g = fa2_generated(fa2_ws64(4), "sm_90a");
  EXPECT_EQ(occurrences(g.source, "(r % 4 == 3 ? kiln::ex2_fma("), 2) << g.source;
  EXPECT_EQ(occurrences(g.source, "float ex2_fma(float x)"), 1) << "the prelude, once";
  EXPECT_EQ(occurrences(g.lowered, "one register in 4 on the FMA pipe (kiln::ex2_fma)"), 2) << g.lowered;
  std::string why;
  if (!rt::nvrtc_available(&why))
    GTEST_SKIP() << "NVRTC not available: " << why;
  expect_compiles_without_spills(g, "sm_90a");
  expect_nvrtc_compiles(fa2_generated(fa2_ws64(1), "sm_90a"), "sm_90a"); // every register on the FMA pipe
  expect_nvrtc_compiles(fa2_generated({{"HEAD_DIM", 128}, {"EXP2_ON_FMA", 8}}, "sm_80"), "sm_80");
}

TEST(Exp2OnFma, NotAskedNotDone) {
  Planned p = plan_for("fa2_fwd", fa2_ws64(0), "sm_90a");
  EXPECT_TRUE(p.plan.exp2_on_fma.ops.empty());
  EXPECT_TRUE(p.plan.exp2_on_fma.why_not.empty());
  const GeneratedKernel g = fa2_generated(fa2_ws64(0), "sm_90a");
  EXPECT_EQ(g.source.find("ex2_fma"), std::string::npos);
}

TEST(Exp2OnFma, SaysWhyWhereNoExp2TileIsSplit) {
  // Matmul has no exponential; FA2's tiles hold fewer than 16 registers of P a thread at 16 x 16 over 4
  // warps.
  Planned mm = plan_for("matmul", {}, "sm_80");
  EXPECT_TRUE(mm.plan.exp2_on_fma.ops.empty());
  Config cfg;
  cfg.set("EXP2_ON_FMA", 4);
  KernelBuilder kb("no_exponential", cfg);
  Value x = kb.arg_ptr("x", f32);
  Value offs = program_id(0) * 128 + arange(0, 128);
  store(x + offs, load(x + offs) * 2.0f);
  Planned none = plan_kernel(kb.finish(), "sm_80");
  EXPECT_EQ(none.plan.exp2_on_fma.why_not, "the kernel has no f32 exp2 tile in registers");
  Planned small = plan_for(
      "fa2_fwd", {{"HEAD_DIM", 64}, {"BLOCK_M", 16}, {"BLOCK_N", 16}, {"num_warps", 1}, {"EXP2_ON_FMA", 16}},
      "sm_80");
  EXPECT_TRUE(small.plan.exp2_on_fma.ops.empty());
  EXPECT_NE(small.plan.exp2_on_fma.why_not.find("no f32 exp2 tile holds 16 registers a thread"),
            std::string::npos)
      << small.plan.exp2_on_fma.why_not;
}

} // namespace
} // namespace kiln_test
