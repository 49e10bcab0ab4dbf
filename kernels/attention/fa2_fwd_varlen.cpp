#include "kernels/attention/fa2_fwd_varlen.h"

#include "kernels/attention/attention_tiles.h"
#include "kernels/attention/fa2_fwd.h"
#include "kernels/codegen_params.h"

#include <algorithm>

namespace kiln {

Kernel build_fa2_fwd_varlen(const Config& config) {
  if (config.get("VARLEN") != 1)
    fail("fa2_fwd_varlen: VARLEN={} but this kernel is the packed one; expected VARLEN=1 (fa2_fwd is the dense "
         "kernel)",
         config.get("VARLEN"));
  return build_fa2_fwd(config);
}

namespace {

// The dense kernel's sizes as the varlen kernel's: the longest sequences stand for N_Q and N_K.
SizeArgs dense_sizes(const SizeArgs& s) {
  return {{"B", s.at("B")}, {"H", s.at("H")}, {"N_Q", s.at("MAX_SEQLEN_Q")}, {"N_K", s.at("MAX_SEQLEN_K")}};
}

KernelDef make_fa2_fwd_varlen_def() {
  const KernelDef& dense = fa2_fwd_def();
  KernelDef d;
  d.name = "fa2_fwd_varlen";
  d.summary = "FlashAttention-2 forward over packed variable-length sequences (cu_seqlens offsets)";
  d.params = attention_param_defs();
  d.params.push_back(min_blocks_per_sm_param(1));
  d.params.push_back(ParamDef::flag(
      "MASK_EVERY_TILE", 0, "1 masks every key tile (no unmasked stage, no skipping above the causal diagonal)"));
  d.params.push_back(ParamDef::choice("VARLEN", 1, "1: packed sequences read through CU_SEQLENS_Q/K", 1, 1));
  d.default_num_warps = dense.default_num_warps;
  d.default_num_stages = dense.default_num_stages;
  d.build = build_fa2_fwd_varlen;
  // fa2_fwd's space without its warp-specialised configs (no TMA here: see the header).
  d.config_space = [] {
    std::vector<Config> cs;
    for (const Config& c : fa2_fwd_def().config_space())
      if (c.get_or("WARP_SPECIALIZE", 0) == 0)
        cs.push_back(varlen_config(c));
    return cs;
  };
  d.size_args = {"B", "H", "H_KV", "TOTAL_Q", "TOTAL_K", "D", "MAX_SEQLEN_Q", "MAX_SEQLEN_K"};
  // Total tokens say how many programs do work; the longest sequences say how wide a tile can usefully be.
  d.tuning_key = {"H", "TOTAL_Q", "MAX_SEQLEN_Q", "MAX_SEQLEN_K"};
  d.bucket = [](const std::string&, int64_t v) { return next_pow2(v); };
  d.prune = [](const Config& c, const SizeArgs& s) { return prune_tiles_past_sequence(c, dense_sizes(s), 64, 32); };
  d.grid = [](const Config& c, const SizeArgs& s) { return query_tile_grid(c, dense_sizes(s)); };
  return d;
}

} // namespace

Config varlen_config(const Config& fa2_config) {
  Config v = fa2_fwd_varlen_def().default_config();
  for (const auto& [name, value] : fa2_config.params)
    if (name != "VARLEN" && v.params.count(name))
      v.set(name, value);
  v.num_warps = fa2_config.num_warps;
  v.num_stages = fa2_config.num_stages;
  return v;
}

const KernelDef& fa2_fwd_varlen_def() {
  static const KernelDef def = make_fa2_fwd_varlen_def();
  return def;
}

} // namespace kiln
