// plan_products_ahead (codegen/plan_products_ahead.h): which products a warp-specialised kernel issues one
// iteration ahead (PRODUCT_AHEAD=1), how the emitted loop orders the wait, the take and the next issue, that the
// result compiles without spills, and why a kernel or config that does not allow it keeps the code it had.
#include "codegen/codegen.h"
#include "codegen/planned_kernel.h"
#include "codegen/source_text.h"
#include "nvrtc_compile.h"

#include <gtest/gtest.h>

namespace kiln_test {
namespace {

std::map<std::string, int64_t> fa2_ahead(int64_t causal, int64_t head_dim = 128, int64_t block_n = 128) {
  return {{"HEAD_DIM", head_dim}, {"BLOCK_N", block_n}, {"CAUSAL", causal}, {"WARP_SPECIALIZE", 1},
          {"PRODUCT_AHEAD", 1}};
}

// FA2's key loops each start with S = Q Kᵀ (Q loaded before the loop, K a ring tile, zero accumulator): that
// product is issued ahead in both; P V (A computed in the loop, the running O as accumulator) is not.
TEST(ProductsAhead, Fa2IssuesQKtAheadInBothKeyLoops) {
  for (int64_t causal : {0, 1, 2}) {
    SCOPED_TRACE("CAUSAL=" + std::to_string(causal));
    Planned p = plan_for("fa2_fwd", fa2_ahead(causal), "sm_90a");
    const ProductsAhead& ahead = p.plan.ahead;
    ASSERT_TRUE(ahead.on()) << ahead.why_not;
    const std::vector<const Op*> loops = ops_of(p.kernel, OpKind::For);
    const std::vector<const Op*> dots = ops_of(p.kernel, OpKind::Dot);
    ASSERT_EQ(loops.size(), 2u);
    ASSERT_EQ(dots.size(), 4u); // Q Kᵀ and P V in each loop, in program order
    EXPECT_EQ(ahead.dots.size(), 2u);
    EXPECT_EQ(ahead.dots.at(loops[0]), dots[0]);
    EXPECT_EQ(ahead.dots.at(loops[1]), dots[2]);
    EXPECT_EQ(ahead.loop_of(*dots[1]), nullptr);
    EXPECT_EQ(ahead.loop_of(*dots[3]), nullptr);
  }
}

// The issue order the plan asks for, in the emitted loop: the product is issued before the loop; in the body the
// first ring load waits for nothing, the iteration waits for its product, takes it, waits for the next slot and
// issues the next product without waiting, all before the softmax's first exponential and before P V.
TEST(ProductsAhead, NextProductIsIssuedBeforeTheSoftmaxAndLeftInFlight) {
  const KernelDef& def = builtin_kernels().find("fa2_fwd");
  const GeneratedKernel g =
      generate_cuda(def.build(def.with_overrides(def.default_config(), fa2_ahead(0))), Target::parse("sm_90a"));
  ASSERT_TRUE(g.why_not_product_ahead.empty()) << g.why_not_product_ahead;
  const std::string& s = g.source;
  const size_t loop = s.find("for (int i", s.find("// the product at fa2_fwd.cpp"));
  ASSERT_NE(loop, std::string::npos);
  const size_t prologue_issue = s.find("// left in flight", s.find("// the product at fa2_fwd.cpp"));
  EXPECT_LT(prologue_issue, loop);
  const size_t take = s.find("// this iteration's product, issued one iteration ahead, is done", loop);
  const size_t next = s.find("// the next iteration's product, left in flight", take);
  const size_t next_wait = s.find("kiln::mbarrier_wait(kiln::smem_u32(&kiln_full0[next_slot", next);
  const size_t next_issue = s.find("// left in flight", next_wait);
  const size_t softmax = s.find("kiln::ex2(", loop);
  const size_t pv = s.find("_rs_", loop); // P V: A from registers
  ASSERT_NE(pv, std::string::npos);
  EXPECT_LT(take, next);
  EXPECT_LT(next, next_wait);
  EXPECT_LT(next_wait, next_issue);
  EXPECT_LT(next_issue, softmax);
  EXPECT_LT(softmax, pv);
  // Each key loop: one slot wait before it and one for the next slot in it; none at the ring load.
  EXPECT_EQ(occurrences(s, "// the slot was waited for where this iteration's product was issued"), 2);
  EXPECT_EQ(occurrences(s, "kiln::mbarrier_wait(kiln::smem_u32(&kiln_full0["), 4);
  EXPECT_NE(g.lowered.find("issued one iteration ahead"), std::string::npos) << g.lowered;
}

TEST(ProductsAhead, NotAskedNotDone) {
  std::map<std::string, int64_t> o = fa2_ahead(0);
  o["PRODUCT_AHEAD"] = 0;
  Planned p = plan_for("fa2_fwd", o, "sm_90a");
  EXPECT_FALSE(p.plan.ahead.on());
  EXPECT_TRUE(p.plan.ahead.why_not.empty());
}

TEST(ProductsAhead, SaysWhyWhereItDoesNotApply) {
  Planned ampere = plan_for("fa2_fwd", fa2_ahead(0), "sm_80");
  EXPECT_NE(ampere.plan.ahead.why_not.find("not warp-specialised"), std::string::npos) << ampere.plan.ahead.why_not;

  std::map<std::string, int64_t> one_stage = fa2_ahead(0);
  one_stage["num_stages"] = 1;
  // One stage: the loop is not pipelined, so it is not specialised, and that is the reason given.
  Planned single = plan_for("fa2_fwd", one_stage, "sm_90a");
  EXPECT_FALSE(single.plan.ws.on());
  EXPECT_NE(single.plan.ahead.why_not.find("not warp-specialised"), std::string::npos) << single.plan.ahead.why_not;
  EXPECT_NE(single.plan.ahead.why_not.find("no pipelined loop"), std::string::npos) << single.plan.ahead.why_not;

  // matmul's product accumulates into the loop's running C, left in flight across iterations: not issued ahead.
  const KernelDef& mm = builtin_kernels().find("matmul");
  Kernel k = mm.build(mm.with_overrides(mm.default_config(), {{"BLOCK_M", 128},
                                                                {"BLOCK_N", 256},
                                                                {"BLOCK_K", 64},
                                                                {"MIN_BLOCKS_PER_SM", 1},
                                                                {"WARP_SPECIALIZE", 1}}));
  k.config.set("PRODUCT_AHEAD", 1);
  Planned matmul = plan_kernel(std::move(k), "sm_90a");
  ASSERT_TRUE(matmul.plan.ws.on()) << matmul.plan.ws.why_not;
  EXPECT_NE(matmul.plan.ahead.why_not.find("is a chain left in flight across iterations"), std::string::npos)
      << matmul.plan.ahead.why_not;

  CodegenOptions off;
  off.product_ahead = false;
  Planned switched_off = plan_for("fa2_fwd", fa2_ahead(0), "sm_90a", off);
  EXPECT_EQ(switched_off.plan.ahead.why_not, "CodegenOptions::product_ahead is off");
}

// Holding the next S tile beside this iteration's S, P and O costs registers: with 64-key tiles the kernel
// compiles with no spill, no ignored setmaxnreg, and no wgmma serialised for want of registers (C7512, which
// would undo the overlap; 128-key tiles at 224 registers get it), causal (both loops), D = 64 and 128.
TEST(ProductsAhead, CompilesWithoutSpillsOrSerialisedProducts) {
  std::string why;
  if (!rt::nvrtc_available(&why))
    GTEST_SKIP() << "NVRTC not available: " << why;
  const KernelDef& def = builtin_kernels().find("fa2_fwd");
  for (const int64_t head_dim : {64, 128}) {
    std::map<std::string, int64_t> o = fa2_ahead(1, head_dim, 64);
    o["num_stages"] = 3;
    const Config c = def.with_overrides(def.default_config(), o);
    SCOPED_TRACE(c.str());
    const GeneratedKernel g = generate_cuda(def.build(c), Target::parse("sm_90a"));
    ASSERT_TRUE(g.why_not_product_ahead.empty()) << g.why_not_product_ahead;
    const std::string log = expect_compiles_without_spills(g, "sm_90a");
    EXPECT_EQ(log.find("C7512"), std::string::npos) << log;
  }
}

} // namespace
} // namespace kiln_test
