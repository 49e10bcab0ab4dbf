// plan_rescale_skips (codegen/plan_rescale_skips.h): which multiplies of a loop's accumulator by a row factor a
// warp skips where its factors are all 1 (LAZY_RESCALE=1), the branch the emitter prints for them, that the
// result compiles (without spills on the warp-specialised late schedule), and why a kernel without such a rescale
// keeps its code.
#include "codegen/codegen.h"
#include "codegen/planned_kernel.h"
#include "codegen/source_text.h"
#include "nvrtc_compile.h"

#include <gtest/gtest.h>

namespace kiln_test {
namespace {

std::map<std::string, int64_t> fa2_lazy(int64_t causal, bool late) {
  std::map<std::string, int64_t> o{{"HEAD_DIM", 128}, {"BLOCK_N", 128}, {"CAUSAL", causal}, {"LAZY_RESCALE", 1}};
  if (late)
    o.insert({{"WARP_SPECIALIZE", 1}, {"LAST_PRODUCT_LATE", 1}, {"num_stages", 3}, {"num_warps", 8}});
  return o;
}

GeneratedKernel fa2_generated(const std::map<std::string, int64_t>& overrides, const std::string& arch) {
  const KernelDef& def = builtin_kernels().find("fa2_fwd");
  return generate_cuda(def.build(def.with_overrides(def.default_config(), overrides)), Target::parse(arch));
}

// Each of FA2's key loops rescales O by alpha = exp2(m_old − m_new) before P V accumulates into it: that multiply is
// the one skipped, its factor the (BLOCK_M,) alpha in registers, its accumulator the loop's carried O.
TEST(RescaleSkips, Fa2SkipsORescaleInBothKeyLoops) {
  for (const char* arch : {"sm_80", "sm_90a"})
    for (int64_t causal : {0, 1}) {
      SCOPED_TRACE(std::string(arch) + " CAUSAL=" + std::to_string(causal));
      Planned p = plan_for("fa2_fwd", fa2_lazy(causal, std::string(arch) == "sm_90a"), arch);
      const RescaleSkips& skips = p.plan.rescale_skips;
      EXPECT_TRUE(skips.why_not.empty()) << skips.why_not;
      const std::vector<const Op*> loops = ops_of(p.kernel, OpKind::For);
      ASSERT_EQ(loops.size(), 2u);
      ASSERT_EQ(skips.ops.size(), 2u);
      for (const auto& [mul, skip] : skips.ops) {
        EXPECT_EQ(mul->binary, BinaryOp::Mul);
        const ValueId acc = mul->operands[skip.accumulator_operand];
        const bool carried_by_a_loop = std::any_of(loops.begin(), loops.end(), [&](const Op* loop) {
          const auto& args = loop->regions[0].args;
          return std::find(args.begin() + 1, args.end(), acc) != args.end();
        });
        EXPECT_TRUE(carried_by_a_loop);
        EXPECT_EQ(p.kernel.info(skip.factor).name, "alpha");
        ASSERT_EQ(p.kernel.type(skip.factor).shape.size(), 1u);
        EXPECT_EQ(p.kernel.type(skip.factor).shape[0], 128);
        EXPECT_EQ(p.plan.where(skip.factor), Placement::Registers);
        EXPECT_LE(p.plan.layout.at(skip.factor).num_regs(), 4);
      }
    }
}

// The emitted rescale: a branch on a warp's vote over its threads' factors, the accumulator copied where they are all
// 1 and multiplied otherwise; the late schedule keeps its issue order around it and compiles without spills or serialised products.
TEST(RescaleSkips, TheRescaleIsABranchOnTheWarpsFactors) {
  const GeneratedKernel g = fa2_generated(fa2_lazy(0, true), "sm_90a");
  ASSERT_TRUE(g.why_not_late_product.empty()) << g.why_not_late_product;
  EXPECT_EQ(occurrences(g.source, "is 1 in each row this warp holds: the rescale is skipped"), 2) << g.source;
  EXPECT_EQ(occurrences(g.source, "if (__all_sync(0xffffffffu, "), 2) << "one vote a warp: a uniform branch";
  EXPECT_EQ(occurrences(g.lowered, "skipped in a warp whose factors"), 2) << g.lowered;
  const size_t branch = g.source.find("the rescale is skipped");
  const size_t copy = g.source.find("[r] = acc", branch);
  const size_t otherwise = g.source.find("} else {", branch);
  const size_t multiply = g.source.find("[r] * bcast", otherwise);
  ASSERT_NE(multiply, std::string::npos);
  EXPECT_LT(copy, otherwise);
  EXPECT_NE(g.source.rfind("== 1.0f && ", branch), std::string::npos) << "a thread holds two rows' factors";
  std::string why;
  if (!rt::nvrtc_available(&why))
    GTEST_SKIP() << "NVRTC not available: " << why;
  const std::string log = expect_compiles_without_spills(g, "sm_90a");
  EXPECT_EQ(log.find("C75"), std::string::npos) << log; // no wgmma serialised by the branch
  expect_nvrtc_compiles(fa2_generated(fa2_lazy(1, false), "sm_80"), "sm_80");
}

TEST(RescaleSkips, NotAskedNotDone) {
  std::map<std::string, int64_t> o = fa2_lazy(0, true);
  o["LAZY_RESCALE"] = 0;
  Planned p = plan_for("fa2_fwd", o, "sm_90a");
  EXPECT_TRUE(p.plan.rescale_skips.ops.empty());
  EXPECT_TRUE(p.plan.rescale_skips.why_not.empty());
  EXPECT_EQ(fa2_generated(o, "sm_90a").source.find("the rescale is skipped"), std::string::npos);
}

// matmul's loop accumulates its product with no rescale: asked for, nothing to skip, and the plan says why.
TEST(RescaleSkips, SaysWhyWhereNoLoopRescalesAnAccumulator) {
  const KernelDef& mm = builtin_kernels().find("matmul");
  Kernel k = mm.build(mm.default_config());
  k.config.set("LAZY_RESCALE", 1);
  Planned p = plan_kernel(std::move(k), "sm_90a");
  EXPECT_TRUE(p.plan.rescale_skips.ops.empty());
  EXPECT_NE(p.plan.rescale_skips.why_not.find("no loop multiplies a carried dot accumulator"), std::string::npos)
      << p.plan.rescale_skips.why_not;
}

} // namespace
} // namespace kiln_test
