// plan_warp_uniform_scalars: on a target with wgmma, the scalar loads and the non-constant bounds of the loops that
// issue wgmma are read through kiln::warp_uniform, so that ptxas keeps the products overlapped (C7520, worklog §91,
// §92); on sm_80 nothing is. That the advisories stay away is ptxas_advisories_test.cpp's business.
#include "codegen/codegen.h"
#include "kernels/attention/attention_block_mask.h"
#include "nvrtc_compile.h"
#include "planned_kernel.h"
#include "source_text.h"

#include <gtest/gtest.h>

namespace kiln_test {
namespace {

bool has_dot(const Op& loop) {
  bool found = false;
  walk(loop.regions[0], [&](const Op& op) { found |= op.kind == OpKind::Dot; });
  return found;
}

bool constant(const Kernel& k, ValueId v) {
  const Op* def = k.info(v).def;
  return def && def->kind == OpKind::Constant;
}

TEST(WarpUniformScalars, TheBoundsOfLoopsIssuingWgmmaOnSm90aOnly) {
  for (const char* kernel : {"fa2_bwd_dkdv", "fa2_fwd", "fa1_fwd", "matmul"}) {
    SCOPED_TRACE(kernel);
    const Planned hopper = plan_for(kernel, {}, "sm_90a");
    ASSERT_TRUE(hopper.plan.any_wgmma());
    size_t bounds = 0;
    for (const Op* loop : ops_of(hopper.kernel, OpKind::For)) {
      const std::vector<int>* b = hopper.plan.uniform.bounds_of(*loop);
      std::vector<int> want;
      if (has_dot(*loop))
        for (int i : {0, 1})
          if (!constant(hopper.kernel, loop->operands[i]))
            want.push_back(i);
      EXPECT_EQ(b ? *b : std::vector<int>{}, want) << loop->loc.str();
      bounds += want.size();
    }
    EXPECT_GT(bounds, 0u);
    // Each is read once, before its loop (none of these kernels is warp-specialised at its default config).
    const GeneratedKernel g = generate_cuda(hopper.kernel, Target::parse("sm_90a"));
    EXPECT_EQ(static_cast<size_t>(occurrences(g.source, "// warp-uniform to ptxas")), bounds) << g.source;
    EXPECT_NE(g.lowered.find("read through kiln::warp_uniform before it"), std::string::npos) << g.lowered;

    const Planned ampere = plan_for(kernel, {}, "sm_80");
    EXPECT_TRUE(ampere.plan.uniform.loop_bounds.empty());
    EXPECT_TRUE(ampere.plan.uniform.loads.empty());
  }
}

// Scalars loaded from memory (a block mask's key ranges) go through it too, beside wgmma only.
TEST(WarpUniformScalars, ScalarLoadsBesideWgmma) {
  const KernelDef& def = fa2_fwd_block_mask_def();
  size_t scalar_loads = 0;
  const Planned hopper = plan_kernel(def.build(def.default_config()), "sm_90a");
  walk(hopper.kernel.body, [&](const Op& op) {
    if (op.kind == OpKind::Load && hopper.plan.where(op.result()) == Placement::Scalar) {
      ++scalar_loads;
      EXPECT_TRUE(hopper.plan.uniform.load(op)) << op.loc.str();
    }
  });
  EXPECT_GT(scalar_loads, 0u);
  EXPECT_TRUE(plan_kernel(def.build(def.default_config()), "sm_80").plan.uniform.loads.empty());
}

// The switch (CodegenOptions::warp_uniform) leaves every scalar plain, and then ptxas puts the deterministic dK/dV's
// products in series (C7520), as it did before the bounds were read so (worklog §91): what the ablation measures.
TEST(WarpUniformScalars, WithoutThemPtxasPutsTheBackwardsProductsInSeries) {
  CodegenOptions off;
  off.warp_uniform = false;
  const Planned plain = plan_for("fa2_bwd_dkdv", {}, "sm_90a", off);
  EXPECT_TRUE(plain.plan.uniform.loop_bounds.empty());
  const GeneratedKernel without = generate_cuda(plain.kernel, Target::parse("sm_90a"), off);
  EXPECT_EQ(without.source.find("kiln::warp_uniform("), std::string::npos);
  std::string why;
  if (!rt::nvrtc_available(&why))
    GTEST_SKIP() << "NVRTC not available: " << why;
  const GeneratedKernel with = generate_cuda(plan_for("fa2_bwd_dkdv", {}, "sm_90a").kernel, Target::parse("sm_90a"));
  const auto c7520 = [](const GeneratedKernel& g) {
    const rt::CompiledKernel k = rt::compile_cuda(compile_request_for(g, "sm_90a"));
    return k.log.find("(C7520)") != std::string::npos;
  };
  EXPECT_TRUE(c7520(without));
  EXPECT_FALSE(c7520(with));
}

} // namespace
} // namespace kiln_test
