#include "kernels/attention/attention_bwd_space.h"

#include "kernels/attention/attention_tiles.h"

#include <algorithm>
#include <string_view>

namespace kiln {

std::vector<Config> bwd_config_space(const Config& base, const char* program_tile) {
  const bool dkdv = std::string_view(program_tile) == "BLOCK_N";
  const char* step_tile = dkdv ? "BLOCK_M" : "BLOCK_N";
  struct Candidate {
    int64_t program, step;
    int warps, stages;
    bool ws = false;     // a producer warpgroup copies the step's tiles by TMA (sm_90a; dK/dV: H == H_KV)
    int64_t min_blocks = 1; // MIN_BLOCKS_PER_SM: CTAs that share an SM (their registers capped to fit)
    bool in_order = false;  // PRODUCTS_IN_ORDER=1 (dK/dV only; dQ has no such param): products in program order
    bool persistent = false; // PERSISTENT=1: one wave of CTAs walks the programs (prune_bwd_config: not causal)
  };
  // Measured on an H100 and an H200 (docs/worklog.md §15): 64 × 64 with 4 warps and 2 stages is the best
  // all-round tile for both loops; 128-row steps win for dK/dV at long sequences with D = 64, 128-key steps
  // a little for dQ; 32-row steps avoid spills past D = 64; 128-wide program tiles over 8 warps (two
  // warpgroups) and 3 stages are there for other shapes and GPUs; 32 × 32 over 2 warps with one stage is
  // what f32 at D = 256 fits in shared memory. dK/dV's 64 keys over 8 warps hold the widest heads' dK and dV
  // without spilling (D = 256 on sm_90a: none, against 3.6 KB at 4 warps; worklog §66; dQ's default does not
  // spill there). The warp-specialised 128 × 64 dK/dV tile (a producer copies Q and dO by TMA) measured 9.65 ms
  // against the best other tile's 9.91 at D = 128 on an H200, 12.0 against 11.0 at D = 64 (worklog §71); with 3
  // stages the same, 128 × 32 and 64 × 64 over one warpgroup slower. Since the producer runs in 24 registers and
  // its consumers in 240 (worklog §81), dQ's 128 query rows over 8 warps warp-specialised measured 4.86 ms against
  // the best other tile's 5.08 at D = 128 on an H200 (and 6.40 against 5.91 at D = 64); dK/dV's 8.61 against 9.17.
  // dK/dV's 64 keys over one warp-specialised warpgroup in each of two CTAs an SM (232 registers a consumer):
  // 8.38 ms against the 128-key tile's 8.53 at D = 128 on an H200, even at D = 64 (worklog §83). dQ's like tile
  // measured slower than its best at both (6.24 against 5.40 ms at D = 64, 5.11 against 4.80 at D = 128), so dQ's
  // space leaves it out. dQ's 128 × 128 warp-specialised tile: 5.65 ms against 6.04–6.15 at D = 64, 4.69 against
  // 4.77 at D = 128 (worklog §87). dK/dV's like tile (LSE and Delta run along Sᵀ's 128 columns, read from the
  // producer's ring at each use) measured 9.2–9.5 ms against 10.0–10.3 at D = 64, deterministic; past 64 columns,
  // or with the fused dQ adds, it spills (prune_bwd_config; worklog §88).
  // The warp-specialised tiles again on a static persistent grid: a short sequence's program is a few steps, and
  // there the producer runs into the next program's steps and its program tiles (second buffers where they fit)
  // while the consumers store this one's (worklog §113).
  const Candidate candidates[] = {{64, 64, 4, 2},  {64, 32, 4, 2},  {64, 128, 4, 2},      {64, 64, 4, 3},
                                  {128, 64, 8, 2}, {128, 32, 8, 2}, {32, 32, 2, 1},       {64, 32, 8, 2},
                                  {128, 64, 8, 2, true},            {64, 64, 4, 2, true, 2},
                                  {128, 128, 8, 2, true, 1, true},  {128, 64, 8, 2, true, 1, false, true},
                                  {64, 64, 4, 2, true, 2, false, true},
                                  {128, 128, 8, 2, true, 1, true, true}};
  std::vector<Config> cs;
  for (const Candidate& k : candidates) {
    if (!dkdv && ((k.program == 64 && k.warps == 8) || k.min_blocks > 1))
      continue;
    Config c = base;
    c.set(program_tile, k.program).set(step_tile, k.step).set("WARP_SPECIALIZE", k.ws ? 1 : 0);
    c.set("MIN_BLOCKS_PER_SM", k.min_blocks).set("PERSISTENT", k.persistent ? 1 : 0);
    if (dkdv)
      c.set("PRODUCTS_IN_ORDER", k.in_order ? 1 : 0);
    c.num_warps = k.warps;
    c.num_stages = k.stages;
    cs.push_back(c);
  }
  return cs;
}

std::string why_not_warp_specialized_dkdv(const Config& c, int64_t H, int64_t H_KV) {
  if (c.get_or("WARP_SPECIALIZE", 0) == 0)
    return "";
  if (H != H_KV)
    return fmt::format("WARP_SPECIALIZE=1 in dK/dV needs one query head a kv head (H == H_KV), got H={} H_KV={}", H,
                       H_KV);
  return "";
}

std::string prune_bwd_config(const Config& c, const SizeArgs& s) {
  if (std::string why = prune_tiles_past_sequence(c, s, 64, 64); !why.empty())
    return why;
  const bool dkdv = c.params.count("ATOMIC_DQ") > 0; // dQ's kernel has no such param
  // Under a causal mask the programs' work differs (dK/dV's first key tiles see the most query rows, dQ's last
  // query tiles the most keys): a static walk hands each CTA a fixed share of them, and the heavy ones end up
  // together (the forward's measured 5-33 % slower, worklog §74).
  if (c.get_or("PERSISTENT", 0) == 1 && c.get("CAUSAL") != 0)
    return fmt::format("PERSISTENT=1 with CAUSAL={}: the programs' work differs along the walk, which a static "
                       "persistent grid does not balance",
                       c.get("CAUSAL"));
  if (std::string why = dkdv ? why_not_warp_specialized_dkdv(c, s.at("H"), s.at("H_KV")) : ""; !why.empty())
    return why;
  // dK/dV's 64 keys over 8 warps are there for heads whose dK and dV spill over 4 (worklog §66); at 128 columns
  // or fewer 4 warps hold them, and the GPU checks have not run the 8-warp tile there.
  if (dkdv && c.get("BLOCK_N") == 64 && c.num_warps == 8 && c.get("HEAD_DIM") <= 128)
    return fmt::format("BLOCK_N=64 over 8 warps is for heads past 128 columns, got HEAD_DIM={}", c.get("HEAD_DIM"));
  // 32 × 32 over 2 warps with one stage is what f32 and the widest heads fit in shared memory; with 16-bit inputs
  // up to 128 columns it is the slowest candidate by 3-4× (42.8 ms against 10.4 for dK/dV at D = 64, N = 16384 on
  // an H200, worklog §88), and its timing is the tuner's longest.
  if (c.get("BLOCK_M") == 32 && c.get("BLOCK_N") == 32 && c.num_warps == 2 && c.get("DTYPE") != 2 &&
      c.get("HEAD_DIM") <= 128)
    return fmt::format("32 x 32 over 2 warps is for f32 or heads past 128 columns, got DTYPE={} HEAD_DIM={}",
                       c.get("DTYPE"), c.get("HEAD_DIM"));
  // 128 query rows a step: Sᵀ, dPᵀ and the accumulators fill the consumers' registers at 64 columns (worklog §88);
  // the fused dQ adds fit there only with the products in the program's order (§109).
  if (dkdv && c.get("BLOCK_N") == 128 && c.get("BLOCK_M") == 128) {
    if (c.get("HEAD_DIM") > 64)
      return fmt::format("dK/dV's 128 x 128 tile is for heads of at most 64 columns, got HEAD_DIM={}",
                         c.get("HEAD_DIM"));
    if (c.get_or("ATOMIC_DQ", 0) != 0 && c.get_or("PRODUCTS_IN_ORDER", 0) == 0)
      return "dK/dV's 128 x 128 tile with the fused dQ adds needs PRODUCTS_IN_ORDER=1 (it spills otherwise)";
  }
  // Past 64 columns two tiles of dK/dV measured 3-7 times slower than the space's best and spill (NVRTC 13.0,
  // sm_90a; worklog §112, H200, f16 B1 H16 N16384 D128): 128 query rows a step over 4 warps 1.8 KB a thread
  // (fused 2.0 KB), 20 ms deterministic and 77 fused against 7.1 and 11.2; the fused dQ adds over one
  // warpgroup in each of two CTAs an SM, whose stage does not fit beside the other CTA (so dQ goes out by `red`
  // from registers), 228 bytes, 40.5 ms (causal 17.7 against 5.35; 10.1 against 2.5 at B4 N4096).
  if (dkdv && c.get("HEAD_DIM") > 64) {
    if (c.get("BLOCK_M") == 128 && c.get("BLOCK_N") == 64 && c.num_warps == 4)
      return fmt::format("dK/dV's 128-row steps over 4 warps are for heads of at most 64 columns (they spill "
                         "past), got HEAD_DIM={}",
                         c.get("HEAD_DIM"));
    if (c.get_or("ATOMIC_DQ", 0) != 0 && c.get_or("MIN_BLOCKS_PER_SM", 1) > 1)
      return fmt::format("the fused dQ adds with MIN_BLOCKS_PER_SM={} are for heads of at most 64 columns (their "
                         "stage does not fit beside the other CTAs and they spill past), got HEAD_DIM={}",
                         c.get_or("MIN_BLOCKS_PER_SM", 1), c.get("HEAD_DIM"));
  }
  return "";
}

} // namespace kiln
