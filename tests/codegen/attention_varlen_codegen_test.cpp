// fa2_fwd_varlen's generated CUDA: it compiles with NVRTC for sm_80 and sm_90a without spills at the default
// config and across its tuning space's ends, reads the offsets as kernel arguments, and keeps its K/V loops
// on cp.async (a block pointer whose shape is read from memory has no TMA map). The dense kernel's generated
// code is held unchanged by the hash list (generated_code_hash_test.cpp), which does not list the varlen
// kernel.
#include "codegen/codegen.h"
#include "kernels/attention/attention_bwd_problem.h"
#include "kernels/attention/attention_varlen_defs.h"
#include "kernels/attention/attention_varlen_problem.h"
#include "kernels/attention/fa2_bwd_dkdv.h"
#include "kernels/attention/fa2_bwd_dq.h"
#include "kernels/attention/fa2_bwd_dq_convert.h"
#include "kernels/attention/fa2_bwd_preprocess.h"
#include "kernels/attention/fa2_bwd_varlen.h"
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
        EXPECT_EQ(g.source.find("TensorMap"), std::string::npos)
            << "no TMA map for a per-sequence block pointer";
      }
      if (nvrtc)
        kiln_test::expect_compiles_without_spills(g, arch);
    }
  if (!nvrtc)
    GTEST_SKIP() << "NVRTC not available (" << why << "): the text is checked, not compiled";
}

} // namespace

namespace {

// The packed backward kernels at the default configs (D = 64 and D = 128 causal, deterministic; D = 64 atomic
// dQ) compile for sm_80 and sm_90a. On sm_90a they spill no more than the dense kernel at the same config. On
// sm_80 the sequence's offsets and lengths, live through dK/dV's loops, cost it a few more bytes than the
// dense kernel spills there (measured: 8 bytes against 4 at D = 64, 40 against 20 at D = 128; the atomic
// variant at D = 64 spills 40 as the dense one does): at most 32 more.
TEST(AttentionVarlenCodegen, BackwardKernelsCompileAndSpillNoMoreThanTheDenseOnes) {
  std::string why;
  if (!rt::nvrtc_available(&why))
    GTEST_SKIP() << "NVRTC not available (" << why << ")";
  for (int64_t d : {64, 128})
    for (bool atomic : {false, true}) {
      if (atomic && d == 128)
        continue; // its compile is the slowest, and the D = 64 one holds the variant's code
      VarlenProblem p;
      p.seqlens_q = {100, 7};
      p.seqlens_k = {30, 300};
      p.D = d, p.causal = 1;
      const AttentionBwdConfigs dense = default_bwd_configs(p.shape(), atomic);
      const std::pair<const KernelDef*, Config> kernels[] = {
          {&fa2_bwd_dkdv_def(), dense.dkdv},
          {&fa2_bwd_dq_def(), dense.dq},
          {&fa2_bwd_preprocess_def(), bwd_preprocess_config(p.shape(), dense.dkdv)},
          {&fa2_bwd_dq_convert_def(), bwd_dq_convert_config(p.shape())}};
      const KernelDef* varlen_defs[] = {&fa2_bwd_dkdv_varlen_def(), &fa2_bwd_dq_varlen_def(),
                                        &fa2_bwd_preprocess_varlen_def(), &fa2_bwd_dq_convert_varlen_def()};
      for (size_t i = 0; i < 4; ++i) {
        if (atomic && i == 1)
          continue; // the atomic variant runs no dQ kernel
        const auto& [dense_def, dense_config] = kernels[i];
        const Config varlen_config = varlen_config_of(*varlen_defs[i], dense_config);
        for (const char* arch : {"sm_80", "sm_90a"}) {
          SCOPED_TRACE(varlen_defs[i]->name + " D" + std::to_string(d) + (atomic ? " atomic " : " ") + arch);
          auto compile = [&](const Kernel& k) {
            const GeneratedKernel g = generate_cuda(k, Target::parse(arch));
            return rt::compile_cuda(kiln_test::compile_request_for(g, arch));
          };
          const rt::CompiledKernel dense_k = compile(dense_def->build(dense_config));
          const rt::CompiledKernel varlen_k = compile(varlen_defs[i]->build(varlen_config));
          EXPECT_FALSE(varlen_k.cubin.empty()) << varlen_k.log;
          const int64_t extra = std::string(arch) == "sm_80" ? 32 : 0;
          EXPECT_LE(varlen_k.usage.spill_store_bytes, dense_k.usage.spill_store_bytes + extra)
              << varlen_k.log;
          std::printf("%s D%lld %s %s: %d registers (dense %d), %lld spill bytes (dense %lld)\n",
                      varlen_defs[i]->name.c_str(), static_cast<long long>(d), atomic ? "atomic" : "det",
                      arch, varlen_k.usage.registers, dense_k.usage.registers,
                      static_cast<long long>(varlen_k.usage.spill_store_bytes),
                      static_cast<long long>(dense_k.usage.spill_store_bytes));
        }
      }
    }
}

} // namespace
