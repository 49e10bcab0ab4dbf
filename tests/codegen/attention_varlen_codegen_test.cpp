// fa2_fwd_varlen's generated CUDA: it compiles with NVRTC for sm_80 and sm_90a without spills at the default
// config and across its tuning space's ends, reads the offsets as kernel arguments, and keeps its K/V loops on
// cp.async (a block pointer whose shape is read from memory has no TMA map). The dense kernel's generated code is
// held unchanged by the hash list (generated_code_hash_test.cpp), which does not list the varlen kernel.
#include "codegen/codegen.h"
#include "kernels/attention/attention_varlen_problem.h"
#include "kernels/attention/fa2_fwd_varlen.h"
#include "nvrtc_compile.h"

#include <gtest/gtest.h>

using namespace kiln;

namespace {

std::vector<std::pair<std::string, Config>> varlen_configs() {
  VarlenProblem p;
  p.seqlens_q = {100, 7};
  p.seqlens_k = {30, 300};
  std::vector<std::pair<std::string, Config>> cs = {{"default_d64", default_fa2_varlen_config(p)}};
  // At D = 128 the default's 4 warps spill on sm_80 in the dense kernel too (100 bytes, and 236 with
  // EXACT_MASKED_V); 8 warps, as kernels_compile_test holds the dense kernel to, do not.
  p.D = 128, p.causal = 2, p.dtype = DType::bf16;
  Config d128 = default_fa2_varlen_config(p);
  d128.num_warps = 8;
  cs.push_back({"d128_w8_causalBR_bf16", d128});
  p.D = 96, p.causal = 1, p.dtype = DType::f16, p.exact_masked_v = true;
  Config d96 = default_fa2_varlen_config(p);
  d96.num_warps = 8;
  cs.push_back({"d96_w8_causalTL_exact_masked_v", d96});
  const std::vector<Config> space = fa2_fwd_varlen_def().config_space();
  cs.push_back({"space_first", space.front()});
  cs.push_back({"space_last", space.back()});
  return cs;
}

TEST(AttentionVarlenCodegen, SpaceHasNoWarpSpecialisedConfigsAndEveryConfigIsVarlen) {
  const std::vector<Config> space = fa2_fwd_varlen_def().config_space();
  EXPECT_GE(space.size(), 20u);
  for (const Config& c : space) {
    EXPECT_EQ(c.get("VARLEN"), 1) << c.str();
    EXPECT_EQ(c.params.count("WARP_SPECIALIZE"), 0u) << c.str();
    EXPECT_NO_THROW(fa2_fwd_varlen_def().check(c)) << c.str();
  }
}

TEST(AttentionVarlenCodegen, CompilesWithoutSpillsForSm80AndSm90a) {
  std::string why;
  const bool nvrtc = rt::nvrtc_available(&why);
  for (const auto& [label, config] : varlen_configs())
    for (const char* arch : {"sm_80", "sm_90a"}) {
      SCOPED_TRACE(label + " " + arch + " " + config.str());
      const GeneratedKernel g = generate_cuda(build_fa2_fwd_varlen(config), Target::parse(arch));
      EXPECT_NE(g.source.find("fa2_fwd_varlen"), std::string::npos);
      EXPECT_NE(g.source.find("CU_SEQLENS_Q"), std::string::npos);
      EXPECT_NE(g.source.find("TOTAL_K"), std::string::npos);
      if (std::string(arch) == "sm_90a") {
        EXPECT_EQ(g.source.find("TensorMap"), std::string::npos) << "no TMA map for a per-sequence block pointer";
      }
      if (nvrtc)
        kiln_test::expect_compiles_without_spills(g, arch);
    }
  if (!nvrtc)
    GTEST_SKIP() << "NVRTC not available (" << why << "): the text is checked, not compiled";
}

} // namespace
