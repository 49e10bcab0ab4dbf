// The tuning space of the attention backward's two loops (fa2_bwd_dkdv, fa2_bwd_dq) and its pruning. In
// both kernels one tile stays on chip for the whole program (the "program tile": BLOCK_N keys in dK/dV,
// BLOCK_M query rows in dQ) while the other streams through the loop (the "step tile").
#pragma once

#include "dsl/registry.h"

namespace kiln {

// `base` (a kernel's default config) with the measured (program tile, step tile, warps, stages) candidates,
// `program_tile` naming the program's param ("BLOCK_N" or "BLOCK_M"): 64 × {64, 32, 128} with 4
// warps and 2 stages, 64 × 64 with 3 stages, 128 × {64, 32} with 8 warps, 32 × 32 with 2 warps and 1 stage.
// Both add a warp-specialised 128 × 64 over 8 warps (WARP_SPECIALIZE=1), which the tuner drops where it does not
// apply (not sm_90a; in dK/dV, H != H_KV); dK/dV adds 64 keys over 8 warps. Every warp-specialised tile comes again
// on a static persistent grid (PERSISTENT=1), which prune_bwd_config drops under a causal mask.
// Every candidate gives each warp at least 16 program rows (an m16 fragment).
std::vector<Config> bwd_config_space(const Config& base, const char* program_tile);

// Why the autotuner should skip `c` for these sizes: a query or key tile wider than the (power-of-two
// padded) sequence it covers, with a floor of 64 so that short sequences keep a config; or an atomic-dQ
// config whose dQ product (BLOCK_M rows) cannot split over its warps; or a warp-specialised dK/dV config that
// cannot serve the sizes (why_not_warp_specialized_dkdv); or a static persistent grid under a causal mask. ""
// keeps it.
std::string prune_bwd_config(const Config& c, const SizeArgs& s);

// Why dK/dV's config cannot run warp-specialised for H query and H_KV kv heads ("" when it can, or does not ask):
// that kernel leaves out the loop over a group's query heads, so it serves one query head a kv head, and the
// deterministic backward only.
std::string why_not_warp_specialized_dkdv(const Config& c, int64_t H, int64_t H_KV);

} // namespace kiln
