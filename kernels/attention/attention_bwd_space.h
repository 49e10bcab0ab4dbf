// The tuning space of the attention backward's two loops (fa2_bwd_dkdv, fa2_bwd_dq) and its pruning. In
// both kernels one tile stays on chip for the whole program (the "program tile": BLOCK_N keys in dK/dV,
// BLOCK_M query rows in dQ) while the other streams through the loop (the "step tile").
#pragma once

#include "dsl/registry.h"

namespace kiln {

// `base` (a kernel's default config) with the program tile `program_tile` ("BLOCK_N" or "BLOCK_M") in
// {64, 128}, the step tile in {32, 64, 128}, 4 or 8 warps (at least 16 program rows a warp: an m16
// fragment) and 1 or 2 stages of the streamed tiles.
std::vector<Config> bwd_config_space(const Config& base, const char* program_tile);

// Why the autotuner should skip `c` for these sizes: a query or key tile wider than the (power-of-two
// padded) sequence it covers, with a floor of 64 so that short sequences keep a config; or an atomic-dQ
// config whose dQ product (BLOCK_M rows) cannot split over its warps. "" keeps it.
std::string prune_bwd_config(const Config& c, const SizeArgs& s);

} // namespace kiln
