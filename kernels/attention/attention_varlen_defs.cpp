#include "kernels/attention/attention_varlen_defs.h"

#include <algorithm>

namespace kiln {

namespace {
// The dense kernels' params packed sequences do not take: TMA cannot map a sequence's block pointers, and a
// persistent grid walks a dense grid of query tiles.
bool dense_only(const std::string& param) {
  return param == "WARP_SPECIALIZE" || param == "PINGPONG" || param == "PRODUCT_AHEAD" ||
         param == "LAST_PRODUCT_LATE" || param == "PERSISTENT";
}

Config default_of(const std::vector<ParamDef>& params, int warps, int stages) {
  Config c;
  for (const ParamDef& p : params)
    c.params[p.name] = p.default_value;
  c.num_warps = warps;
  c.num_stages = stages;
  return c;
}

Config mapped(const Config& dense_config, Config out) {
  for (const auto& [name, value] : dense_config.params)
    if (name != "VARLEN" && out.params.count(name))
      out.set(name, value);
  out.num_warps = dense_config.num_warps;
  out.num_stages = dense_config.num_stages;
  return out;
}
} // namespace

SizeArgs dense_sizes_of_varlen(const SizeArgs& s) {
  return {{"B", s.at("B")},
          {"H", s.at("H")},
          {"H_KV", s.at("H_KV")},
          {"N_Q", s.at("MAX_SEQLEN_Q")},
          {"N_K", s.at("MAX_SEQLEN_K")},
          {"D", s.at("D")}};
}

KernelDef make_varlen_def(const KernelDef& dense, std::string name, std::string summary) {
  KernelDef d;
  d.name = std::move(name);
  d.summary = std::move(summary);
  for (const ParamDef& p : dense.params)
    if (!dense_only(p.name))
      d.params.push_back(p);
  d.params.push_back(ParamDef::choice("VARLEN", 1, "1: packed sequences read through CU_SEQLENS_Q/K", 1, 1));
  d.default_num_warps = dense.default_num_warps;
  d.default_num_stages = dense.default_num_stages;
  d.build = dense.build;
  const Config base = default_of(d.params, d.default_num_warps, d.default_num_stages);
  if (dense.config_space)
    d.config_space = [&dense, base] {
      std::vector<Config> cs;
      for (const Config& c : dense.config_space())
        if (c.get_or("WARP_SPECIALIZE", 0) == 0)
          cs.push_back(mapped(c, base));
      return cs;
    };
  d.size_args = {"B", "H", "H_KV", "TOTAL_Q", "TOTAL_K", "D", "MAX_SEQLEN_Q", "MAX_SEQLEN_K"};
  // Total tokens say how many programs have work; the longest sequences how wide a tile can usefully be.
  d.tuning_key = {"H", "TOTAL_Q", "MAX_SEQLEN_Q", "MAX_SEQLEN_K"};
  d.bucket = [](const std::string&, int64_t v) { return next_pow2(v); };
  if (dense.prune)
    d.prune = [&dense](const Config& c, const SizeArgs& s) {
      return dense.prune(c, dense_sizes_of_varlen(s));
    };
  d.grid = [&dense](const Config& c, const SizeArgs& s) { return dense.grid(c, dense_sizes_of_varlen(s)); };
  return d;
}

Config varlen_config_of(const KernelDef& varlen, const Config& dense_config) {
  return mapped(dense_config, varlen.default_config());
}

} // namespace kiln
