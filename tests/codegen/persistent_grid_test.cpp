// plan_persistent_grid (codegen/plan_persistent_grid.h): PERSISTENT=1 runs the program in a loop over program
// ids, one wave of MIN_BLOCKS_PER_SM CTAs an SM; where the kernel reads program ids along y or z, or the switch
// is off, the kernel stays as it was and says why.
#include "codegen/codegen.h"
#include "codegen/planned_kernel.h"
#include "codegen/source_text.h"
#include "dsl/dsl.h"

#include <gtest/gtest.h>

namespace kiln_test {
namespace {

GeneratedKernel matmul_at(const std::map<std::string, int64_t>& overrides, const std::string& arch,
                          const CodegenOptions& options = {}) {
  const KernelDef& def = builtin_kernels().find("matmul");
  return generate_cuda(def.build(def.with_overrides(def.default_config(), overrides)), Target::parse(arch), options);
}

TEST(PersistentGrid, MatmulWalksItsTilesWithAWaveOfMinBlocksPerSm) {
  Planned p = plan_for("matmul", {{"PERSISTENT", 1}}, "sm_80");
  EXPECT_TRUE(p.plan.persistent.on) << p.plan.persistent.why_not;
  EXPECT_EQ(p.plan.persistent.ctas_per_sm, 2); // matmul's default MIN_BLOCKS_PER_SM
  const GeneratedKernel g = matmul_at({{"PERSISTENT", 1}}, "sm_80");
  EXPECT_EQ(g.persistent_ctas_per_sm, 2);
  EXPECT_TRUE(g.why_not_persistent.empty());
  // program_id(0) is the loop's variable everywhere; the launch's grid size is the kernel's last parameter.
  EXPECT_EQ(occurrences(g.source, "(int)blockIdx.x"), 0) << g.source;
  EXPECT_EQ(occurrences(g.source, "kiln_program = blockIdx.x"), 1);
  EXPECT_NE(g.source.find(", int kiln_programs)"), std::string::npos);
  EXPECT_EQ(matmul_at({}, "sm_80").persistent_ctas_per_sm, 0);
}

TEST(PersistentGrid, AWarpSpecialisedProducerWalksTheSameProgramIds) {
  const GeneratedKernel g = matmul_at({{"BLOCK_M", 128},
                                       {"BLOCK_N", 256},
                                       {"BLOCK_K", 64},
                                       {"MIN_BLOCKS_PER_SM", 1},
                                       {"WARP_SPECIALIZE", 1},
                                       {"PERSISTENT", 1}},
                                      "sm_90a");
  EXPECT_TRUE(g.why_not_warp_specialized.empty()) << g.why_not_warp_specialized;
  EXPECT_EQ(g.threads, 384);
  EXPECT_EQ(g.persistent_ctas_per_sm, 1);
  // One loop over program ids in the producer's branch, one in the consumers'; the maps, then the switch, then
  // the grid size.
  EXPECT_EQ(occurrences(g.source, "kiln_program = blockIdx.x"), 2) << g.source;
  EXPECT_NE(g.source.find("int kiln_tma, int kiln_programs)"), std::string::npos);
  EXPECT_NE(g.lowered.find("persistent grid: 1 CTA(s) an SM"), std::string::npos) << g.lowered;
}

// FA2's forward with PERSISTENT=1 numbers its programs along x (query_tile_program), so the persistent grid
// applies; its head coordinates (program / tiles) are still provably non-negative, so K and V keep their TMA
// copies and the producer warpgroup walks the same programs, running into the next query tile's keys.
TEST(PersistentGrid, Fa2ForwardWalksItsQueryTilesWarpSpecialisedWithTma) {
  for (int causal : {0, 1}) {
    const KernelDef& def = builtin_kernels().find("fa2_fwd");
    const Config c = def.with_overrides(def.default_config(), {{"BLOCK_M", 128},
                                                               {"BLOCK_N", 128},
                                                               {"HEAD_DIM", 128},
                                                               {"CAUSAL", causal},
                                                               {"WARP_SPECIALIZE", 1},
                                                               {"PERSISTENT", 1}});
    const GeneratedKernel g = generate_cuda(def.build(c), Target::parse("sm_90a"));
    SCOPED_TRACE(c.str());
    EXPECT_TRUE(g.why_not_persistent.empty()) << g.why_not_persistent;
    EXPECT_EQ(g.persistent_ctas_per_sm, 1);
    EXPECT_TRUE(g.why_not_warp_specialized.empty()) << g.why_not_warp_specialized;
    EXPECT_EQ(g.tensor_maps.size(), 2u) << g.lowered; // K and V
    EXPECT_EQ(occurrences(g.source, "kiln_program = blockIdx.x"), 2) << g.source;
    EXPECT_EQ(occurrences(g.source, "blockIdx.y"), 0);
  }
}

TEST(PersistentGrid, SwitchedOffOrNotAskedForNothingChanges) {
  CodegenOptions off;
  off.persistent = false;
  const GeneratedKernel g = matmul_at({{"PERSISTENT", 1}}, "sm_90a", off);
  EXPECT_EQ(g.persistent_ctas_per_sm, 0);
  EXPECT_EQ(g.why_not_persistent, "CodegenOptions::persistent is off");
  EXPECT_EQ(occurrences(g.source, "kiln_program"), 0);
  Planned p = plan_for("matmul", {}, "sm_90a");
  EXPECT_FALSE(p.plan.persistent.on);
  EXPECT_TRUE(p.plan.persistent.why_not.empty());
}

TEST(PersistentGrid, ProgramIdsAlongYAreRefusedWithTheirLine) {
  Config cfg;
  cfg.set("PERSISTENT", 1);
  KernelBuilder kb("rows_and_columns", cfg);
  Value x = kb.arg_ptr("x", f32);
  Value offs = (program_id(1) * 128 + program_id(0)) * 64 + arange(0, 64);
  store(x + offs, load(x + offs) * 2.0f);
  const GeneratedKernel g = generate_cuda(kb.finish(), Target::parse("sm_90a"));
  EXPECT_EQ(g.persistent_ctas_per_sm, 0);
  EXPECT_NE(g.why_not_persistent.find("program_id(1) at persistent_grid_test.cpp:"), std::string::npos)
      << g.why_not_persistent;
}

} // namespace
} // namespace kiln_test
