// The FA2 forward with attention mods (attention_mods.h) generates CUDA that compiles with NVRTC for sm_90a
// and sm_80 (where NVRTC is usable): the combination of a document mask, a sliding window and softcapping
// (mask mods' key loop, tensor reads), ALiBi and attention sinks on the built-in causal path (two stages), a
// bias in f16 with prefix-LM; and the mods' code is in the text (tanhf, the mod tensors as kernel
// parameters). The backward's dK/dV (both variants) and dQ kernels with the same mods too, with the
// derivative's code (softcap's 1 - tanh²) in them. The sink logits' gradient kernel, per row and per head.
#include "kernels/attention/attention_bwd_problem.h"
#include "kernels/attention/attention_mod_library.h"
#include "kernels/attention/attention_mod_spec.h"
#include "kernels/attention/attention_mods_host.h"
#include "kernels/attention/attention_problem.h"
#include "kernels/attention/attention_varlen_defs.h"
#include "kernels/attention/attention_varlen_mods.h"
#include "kernels/attention/fa2_bwd_dkdv.h"
#include "kernels/attention/fa2_bwd_dq.h"
#include "kernels/attention/fa2_bwd_sink.h"
#include "kernels/attention/fa2_bwd_varlen.h"
#include "kernels/attention/fa2_fwd.h"
#include "kernels/attention/fa2_fwd_varlen.h"
#include "nvrtc_compile.h"

#include <gtest/gtest.h>

using namespace kiln;
using kiln_test::expect_nvrtc_compiles;

namespace {

struct ModKernel {
  const char* label;
  AttentionMods mods;
  int causal;
  DType dtype;
};

std::vector<ModKernel> mod_kernels() {
  std::vector<ModKernel> ks;
  ModKernel combo{"document_window_softcap", {}, 0, DType::bf16};
  combo.mods.mask = {document_mask(), sliding_window(256, 0)};
  combo.mods.score = {softcap(30)};
  ks.push_back(combo);
  ModKernel alibi_causal{"alibi_sinks_causal", {}, 1, DType::f16};
  alibi_causal.mods.score = {alibi()};
  alibi_causal.mods.sink = {attention_sinks()};
  ks.push_back(alibi_causal);
  ModKernel bias{"bias_f16_prefix_lm", {}, 0, DType::f16};
  bias.mods.score = {additive_bias(DType::f16)};
  bias.mods.mask = {prefix_lm(128)};
  ks.push_back(bias);
  // Mods written as expressions (attention_mod_expr.h): integer and float arithmetic, functions, where(),
  // tensor reads of f16 and i32.
  ModKernel expr{"expressions", {}, 0, DType::f16};
  expr.mods = parse_mod_specs("score=where(kv_idx % 4 == 0, 20 * tanh(score / 20), score) + t:f16[h, kv_idx];"
                              "mask=doc:i32[b, q_idx] <= min(kv_idx, q_idx + 64) || h == 0")
                  .mods;
  ks.push_back(expr);
  return ks;
}

// `def` (built with mk's mods) at `config` on `arch`: the mods' tensors are its parameters, the combination's
// softcap is its tanh, and NVRTC compiles it.
void expect_mod_kernel_compiles(const ModKernel& mk, const KernelDef& def, const Config& config,
                                const char* arch) {
  def.check(config);
  GeneratedKernel g = generate_cuda(def.build(config), Target::parse(arch));
  for (const ModTensorSpec& t : mk.mods.tensors()) {
    EXPECT_NE(g.source.find("mod_" + t.name), std::string::npos) << "parameter mod_" << t.name;
  }
  if (std::string(mk.label) == "document_window_softcap") {
    EXPECT_NE(g.source.find("tanhf"), std::string::npos) << "softcap's tanh";
  }
  expect_nvrtc_compiles(g, arch);
}

TEST(AttentionModsCodegen, ModKernelsCompileForSm90aAndSm80) {
  for (const ModKernel& mk : mod_kernels())
    for (const char* arch : {"sm_90a", "sm_80"}) {
      SCOPED_TRACE(std::string(mk.label) + " " + arch);
      AttentionProblem p;
      p.D = 128;
      p.causal = mk.causal;
      p.dtype = mk.dtype;
      expect_mod_kernel_compiles(mk, fa2_fwd_def(mk.mods), default_fa2_config(p), arch);
    }
}

TEST(AttentionModsCodegen, BackwardModKernelsCompileForSm90aAndSm80) {
  // Every mod on sm_90a; sm_80 and the atomic variant (the same dS) for the combination only, to keep the
  // suite's NVRTC time bounded.
  for (const ModKernel& mk : mod_kernels())
    for (const char* arch : {"sm_90a", "sm_80"})
      for (bool atomic_dq : {false, true}) {
        const bool combination = std::string(mk.label) == "document_window_softcap";
        if ((std::string(arch) == "sm_80" || atomic_dq) && !combination)
          continue;
        SCOPED_TRACE(std::string(mk.label) + " " + arch + (atomic_dq ? " atomic dQ" : ""));
        AttentionProblem p;
        p.D = 128;
        p.causal = mk.causal;
        p.dtype = mk.dtype;
        const AttentionBwdConfigs configs = default_bwd_configs(p, atomic_dq);
        std::vector<std::pair<const KernelDef*, Config>> kernels = {
            {&fa2_bwd_dkdv_def(mk.mods), configs.dkdv}};
        if (!atomic_dq)
          kernels.push_back({&fa2_bwd_dq_def(mk.mods), configs.dq});
        for (const auto& [def, config] : kernels) {
          SCOPED_TRACE(def->name);
          expect_mod_kernel_compiles(mk, *def, config, arch);
        }
      }
}

// The packed (varlen) forward, dK/dV and dQ with every library mod kernel above, on sm_90a (the combination
// on sm_80 too): the mods' tensors follow the offsets as parameters.
TEST(AttentionModsCodegen, VarlenModKernelsCompile) {
  for (const ModKernel& mk : mod_kernels())
    for (const char* arch : {"sm_90a", "sm_80"}) {
      if (std::string(arch) == "sm_80" && std::string(mk.label) != "document_window_softcap")
        continue;
      SCOPED_TRACE(std::string(mk.label) + " " + arch);
      VarlenProblem p;
      p.seqlens_q = {100, 3};
      p.seqlens_k = {70, 200};
      p.D = 128;
      p.causal = mk.causal;
      p.dtype = mk.dtype;
      const AttentionBwdConfigs bwd = default_varlen_bwd_configs(p);
      for (const auto& [def, config] : {std::pair{&fa2_fwd_varlen_def(mk.mods), default_fa2_varlen_config(p)},
                                        {&fa2_bwd_dkdv_varlen_def(mk.mods), bwd.dkdv},
                                        {&fa2_bwd_dq_varlen_def(mk.mods), bwd.dq}}) {
        SCOPED_TRACE(def->name);
        expect_mod_kernel_compiles(mk, *def, config, arch);
      }
    }
}

// fa2_bwd_sink (the sink logits' gradient) per row and per head (its loop over a head's row tiles), with
// the library's per-head sinks beside ALiBi, on both arches.
TEST(AttentionModsCodegen, SinkGradientKernelCompilesForSm90aAndSm80) {
  const ModKernel mk = mod_kernels()[1]; // alibi_sinks_causal
  for (const char* arch : {"sm_90a", "sm_80"})
    for (bool per_head : {false, true}) {
      SCOPED_TRACE(std::string(arch) + (per_head ? " per head" : " per row"));
      AttentionProblem p;
      p.D = 128;
      p.causal = mk.causal;
      p.dtype = mk.dtype;
      expect_mod_kernel_compiles(mk, fa2_bwd_sink_def(mk.mods), fa2_bwd_sink_config(p, per_head), arch);
    }
}

} // namespace
