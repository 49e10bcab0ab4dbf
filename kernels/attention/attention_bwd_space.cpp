#include "kernels/attention/attention_bwd_space.h"

#include <algorithm>
#include <string_view>

namespace kiln {

std::vector<Config> bwd_config_space(const Config& base, const char* program_tile) {
  const char* step_tile = std::string_view(program_tile) == "BLOCK_N" ? "BLOCK_M" : "BLOCK_N";
  std::vector<Config> cs;
  for (int64_t program : {64, 128})
    for (int64_t step : {32, 64, 128})
      for (int warps : {4, 8})
        for (int stages : {1, 2}) {
          if (program < 16 * warps)
            continue;
          Config c = base;
          c.set(program_tile, program).set(step_tile, step);
          c.num_warps = warps;
          c.num_stages = stages;
          cs.push_back(c);
        }
  return cs;
}

std::string prune_bwd_config(const Config& c, const SizeArgs& s) {
  const int64_t rows = std::max<int64_t>(64, next_pow2(s.at("N_Q")));
  const int64_t keys = std::max<int64_t>(64, next_pow2(s.at("N_K")));
  if (c.get("BLOCK_M") > rows)
    return fmt::format("BLOCK_M={} is wider than the {} query rows it needs (N_Q={})", c.get("BLOCK_M"), rows,
                       s.at("N_Q"));
  if (c.get("BLOCK_N") > keys)
    return fmt::format("BLOCK_N={} is wider than the {} keys it needs (N_K={})", c.get("BLOCK_N"), keys,
                       s.at("N_K"));
  if (c.get_or("ATOMIC_DQ", 0) != 0 && c.get("BLOCK_M") < 16 * c.num_warps)
    return fmt::format("ATOMIC_DQ=1 needs BLOCK_M >= 16 * num_warps, got BLOCK_M={} with {} warps", c.get("BLOCK_M"),
                       c.num_warps);
  return "";
}

} // namespace kiln
