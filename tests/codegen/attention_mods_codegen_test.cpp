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

#include <regex>

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

// The generated CUDA without comments (which name the DSL lines the ops came from) and without blank lines.
std::string code_of(const KernelDef& def, const Config& config) {
  const std::string src = generate_cuda(def.build(config), Target::parse("sm_90a")).source;
  std::string out;
  for (size_t at = 0; at < src.size();) {
    size_t eol = src.find('\n', at);
    eol = eol == std::string::npos ? src.size() : eol;
    std::string line = src.substr(at, eol - at);
    line = line.substr(0, line.find("//"));
    if (line.find_first_not_of(" \t") != std::string::npos)
      out += line + "\n";
    at = eol + 1;
  }
  return out;
}

TEST(AttentionModsCodegen, MasksWrittenAsExpressionsBuildTheLibrarysKernels) {
  // Same ops, same key bounds (the tiles skipped and the tiles visited whole), same tile order: the same
  // code.
  const std::vector<std::pair<std::string, MaskMod>> pairs = {
      {"mask=kv_idx <= q_idx", causal_mask(false)},
      {"mask=kv_idx >= q_idx - 64 && kv_idx <= q_idx + 16", sliding_window(64, 16)},
      // "+ 0": the library's window builds q_idx + right even for right = 0
      {"mask=kv_idx >= q_idx - 256 && kv_idx <= q_idx + 0", sliding_window(256, 0)}};
  AttentionProblem p;
  p.D = 128;
  for (const auto& [spec, library] : pairs) {
    SCOPED_TRACE(spec);
    AttentionMods expr = parse_mod_specs(spec).mods, lib;
    lib.mask = {library};
    ASSERT_TRUE(expr.mask[0].key_bounds);
    EXPECT_EQ(expr.mask[0].later_rows_see_more, library.later_rows_see_more);
    const Config config = default_fa2_config(p);
    const std::string a = code_of(fa2_fwd_def(expr), config), b = code_of(fa2_fwd_def(lib), config);
    size_t at = 0;
    while (at < a.size() && at < b.size() && a[at] == b[at])
      ++at;
    const size_t line = a.rfind('\n', at) == std::string::npos ? 0 : a.rfind('\n', at) + 1;
    EXPECT_EQ(a.size(), b.size());
    EXPECT_EQ(at, a.size()) << "first difference:\n  expression: " << a.substr(line, a.find('\n', at) - line)
                            << "\n  library:    " << b.substr(line, b.find('\n', at) - line);
  }
  // A term the bounds cannot read (documents) leaves the window's bounds, without the keys every row sees.
  const MaskMod doc_window =
      parse_mod_specs("mask=kv_idx > q_idx - 8 && q_doc:i32[b, q_idx] == kv_doc:i32[b, kv_idx]").mods.mask[0];
  ASSERT_TRUE(doc_window.key_bounds);
  EXPECT_FALSE(doc_window.later_rows_see_more);
  EXPECT_FALSE(parse_mod_specs("mask=kv_idx <= q_idx || kv_idx < 4").mods.mask[0].key_bounds);
}

// `code` without the scalar definitions ("const T name = ...;") nothing reads (repeatedly: a definition read
// only by such a line goes too), its names' numbers dropped (they follow how many values came before).
std::string live_code_unnumbered(const std::string& code) {
  std::vector<std::string> lines;
  for (size_t at = 0; at < code.size();) {
    const size_t eol = code.find('\n', at);
    lines.push_back(code.substr(at, eol - at));
    at = eol == std::string::npos ? code.size() : eol + 1;
  }
  const std::regex definition(R"(^\s*const (int|float|long long) (\w+) = .*;$)");
  for (bool dropped = true; dropped;) {
    dropped = false;
    for (size_t i = 0; i < lines.size(); ++i) {
      std::smatch m;
      if (!std::regex_match(lines[i], m, definition))
        continue;
      const std::regex use("\\b" + m[2].str() + "\\b");
      bool read = false;
      for (size_t j = 0; j < lines.size() && !read; ++j)
        read = j != i && std::regex_search(lines[j], use);
      if (!read) {
        lines.erase(lines.begin() + static_cast<std::ptrdiff_t>(i));
        dropped = true;
        break;
      }
    }
  }
  std::string out;
  for (const std::string& line : lines)
    out += std::regex_replace(line, std::regex(R"(\b([A-Za-z_]+?)\d+\b)"), "$1#") + "\n";
  return out;
}

// A score mod that returns its input counts as none (AttentionMods::score_mods_return_their_input): the kernel is
// the built-in one but for the mods' batch and head indices and row clamps, which nothing reads (ptxas drops them),
// so it runs at the built-in kernel's speed by construction.
TEST(AttentionModsCodegen, ANoOpScoreModBuildsTheBuiltInKernel) {
  AttentionProblem p;
  p.D = 128;
  for (int causal : {0, 1}) {
    p.causal = causal;
    Config config = default_fa2_config(p);
    config.set("BLOCK_N", 128).set("WARP_SPECIALIZE", 1);
    config.num_stages = 3;
    SCOPED_TRACE(config.str());
    const std::string modded = code_of(fa2_fwd_def(parse_mod_specs("score=score").mods), config);
    EXPECT_EQ(live_code_unnumbered(modded), live_code_unnumbered(code_of(fa2_fwd_def(), config)));
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
