// The widest heads' backward: the configs default_bwd_configs picks past D = 128 (attention_bwd_problem.cpp) and
// what ptxas makes of them on sm_90a. dK and dV of 64 keys at D = 256 are 2 × 64 × 256 f32 a program: over 4 warps
// they spilled 3.6 KB a thread, over 8 none (worklog §66). D = 192 runs as two head-dim tiles (SPLIT_D) of 192
// columns, where 4 warps measured faster.
#include "codegen/codegen.h"
#include "kernels/attention/attention_bwd_problem.h"
#include "kernels/attention/fa2_bwd_dkdv.h"
#include "kernels/attention/fa2_bwd_dq.h"
#include "nvrtc_compile.h"

#include <gtest/gtest.h>

namespace kiln_test {
namespace {

kiln::AttentionProblem problem_with_head_dim(int64_t d, kiln::DType dtype = kiln::DType::f16) {
  kiln::AttentionProblem p;
  p.D = d;
  p.dtype = dtype;
  return p;
}

TEST(AttentionWideHeads, BackwardDefaultsSpreadDkDvOverEightWarpsPast192Columns) {
  using kiln::default_bwd_configs;
  EXPECT_EQ(default_bwd_configs(problem_with_head_dim(256)).dkdv.num_warps, 8);
  EXPECT_EQ(default_bwd_configs(problem_with_head_dim(200, kiln::DType::bf16)).dkdv.num_warps, 8);
  EXPECT_EQ(default_bwd_configs(problem_with_head_dim(192)).dkdv.num_warps, 4); // two tiles, 192 columns
  EXPECT_EQ(default_bwd_configs(problem_with_head_dim(192)).dkdv.get("SPLIT_D"), 1);
  EXPECT_EQ(default_bwd_configs(problem_with_head_dim(128)).dkdv.num_warps, 4);
  // The atomic variant's dQ product needs 16 rows a warp; f32 at 256 fits only 2 warps' small tiles.
  EXPECT_EQ(default_bwd_configs(problem_with_head_dim(256), /*atomic_dq=*/true).dkdv.num_warps, 4);
  EXPECT_EQ(default_bwd_configs(problem_with_head_dim(256, kiln::DType::f32)).dkdv.num_warps, 2);
}

// The tuner runs dK/dV's 8-warp 64-key tile only past 128 columns, where 4 warps spill; dQ's space has none.
TEST(AttentionWideHeads, EightWarpDkDvTileIsTunedOnlyForWideHeads) {
  const kiln::KernelDef& dkdv = kiln::fa2_bwd_dkdv_def();
  const kiln::SizeArgs sizes = {{"B", 1}, {"H", 1}, {"H_KV", 1}, {"N_Q", 4096}, {"N_K", 4096}, {"D", 256}};
  int eight_warp_tiles = 0;
  for (kiln::Config c : dkdv.config_space()) {
    if (c.get("BLOCK_N") != 64 || c.num_warps != 8)
      continue;
    ++eight_warp_tiles;
    EXPECT_EQ(dkdv.prune(c.set("HEAD_DIM", 256), sizes), "");
    EXPECT_NE(dkdv.prune(c.set("HEAD_DIM", 128), sizes).find("past 128 columns"), std::string::npos);
  }
  EXPECT_EQ(eight_warp_tiles, 1);
  for (const kiln::Config& c : kiln::fa2_bwd_dq_def().config_space())
    EXPECT_FALSE(c.get("BLOCK_M") == 64 && c.num_warps == 8) << c.str();
}

TEST(AttentionWideHeads, BackwardDefaultsAtD256CompileWithoutSpillsOnHopper) {
  std::string why;
  if (!kiln::rt::nvrtc_available(&why))
    GTEST_SKIP() << "NVRTC not available: " << why;
  const kiln::AttentionBwdConfigs c = default_bwd_configs(problem_with_head_dim(256));
  for (const auto& [def, config] : {std::pair{&kiln::fa2_bwd_dkdv_def(), c.dkdv}, {&kiln::fa2_bwd_dq_def(), c.dq}}) {
    SCOPED_TRACE(def->name + " " + config.str());
    (void)expect_compiles_without_spills(kiln::generate_cuda(def->build(config), kiln::Target::parse("sm_90a")),
                                         "sm_90a");
  }
}

} // namespace
} // namespace kiln_test
