// Dots below the tensor cores' 16 x 16 x 16 tile lower to FMA (codegen/choose_dot_lowering.h) with their result in
// the default blocked layout, in every dtype and on both archs, and compile with NVRTC; beside an mma dot in the
// same kernel they leave that dot's instruction and warp split as they would be alone.
#include "small_dot_kernel.h"

#include "codegen/assign_layouts.h"
#include "codegen/choose_dot_lowering.h"
#include "codegen/codegen.h"
#include "nvrtc_compile.h"

#include <gtest/gtest.h>

using namespace kiln;
using kiln_test::SmallDot;

namespace {

TEST(SmallDotCodegen, LowersToFmaInEveryDtypeAndCompiles) {
  for (const SmallDot& d : {SmallDot{4, 4, 8, DType::f32}, SmallDot{8, 8, 16, DType::f16},
                            SmallDot{8, 32, 4, DType::bf16}, SmallDot{2, 16, 4, DType::f64},
                            SmallDot{32, 32, 1, DType::f32}})
    for (const char* arch : {"sm_80", "sm_90a"}) {
      const Kernel k = kiln_test::small_dot_kernel(d);
      const Target target = Target::parse(arch);
      LoweringPlan plan = assign_layouts(k, target, {});
      choose_dot_lowering(k, target, {}, plan);
      ASSERT_EQ(plan.dots.size(), 1u);
      EXPECT_EQ(plan.dots.begin()->second.instruction, DotInstruction::Fma) << arch;
      EXPECT_NE(plan.layout.at(plan.dots.begin()->first->result()).kind, LayoutKind::Mma) << arch;
      const GeneratedKernel g = generate_cuda(k, target);
      EXPECT_NE(g.source.find("dot by fused multiply-add"), std::string::npos) << arch;
      kiln_test::expect_nvrtc_compiles(g, arch);
    }
}

TEST(SmallDotCodegen, BesideAnMmaDotLeavesItsInstructionAndWarpSplit) {
  const SmallDot d{4, 4, 8, DType::f32};
  for (const char* arch : {"sm_80", "sm_90a"}) {
    const Target target = Target::parse(arch);
    const Kernel both = kiln_test::small_dot_kernel(d, /*beside_mma=*/true);
    LoweringPlan plan = assign_layouts(both, target, {});
    choose_dot_lowering(both, target, {}, plan);
    int fma = 0, tensor_cores = 0;
    for (const auto& [op, dp] : plan.dots)
      (dp.instruction == DotInstruction::Fma ? fma : tensor_cores) += 1;
    EXPECT_EQ(fma, 1) << arch;
    EXPECT_EQ(tensor_cores, 1) << arch;
    // The 64 x 64 product's warps split as if the small dot were not there (4 warps: 4 x 1 or 2 x 2).
    EXPECT_EQ(plan.warps.warps_m * plan.warps.warps_n, 4) << arch;
    kiln_test::expect_nvrtc_compiles(generate_cuda(both, target), arch);
  }
}

} // namespace
