// The compile-time parameters the code generator reads from a kernel's config (codegen/codegen.h), as the
// shipped kernels declare them. Tuning spaces vary them.
// - MIN_BLOCKS_PER_SM: the second __launch_bounds__ argument, capping registers per thread so that that many
//   CTAs can be resident on one SM (FA2, matmul, softmax).
// - WARP_SPECIALIZE: 1 asks for a producer warpgroup that issues the pipelined loops' TMA copies while the
//   num_warps warps compute (codegen/plan_warp_specialization.h; matmul, FA2 forward).
// - PINGPONG: 1 has a warp-specialised kernel's consumer warpgroups issue the loops' tensor-core products in turn,
//   so that one's elementwise work runs beside another's products (codegen/plan_pingpong.h; FA2 forward).
// - PRODUCT_AHEAD: 1 has a warp-specialised kernel's loops issue their first tensor-core product one iteration
//   ahead, so that it runs under the rest of the iteration (codegen/plan_products_ahead.h; FA2 forward).
// - LAST_PRODUCT_LATE: 1 has a warp-specialised kernel's loops issue their last tensor-core product after the
//   next iteration's first, so that the next iteration's elementwise work runs under it
//   (codegen/plan_late_products.h; FA2 forward).
// - PERSISTENT: 1 launches at most as many CTAs as fit on the device at once, each walking every gridDim.x-th
//   program id; 2 has each CTA draw its next program id from a counter, so that the first CTA done takes the next
//   program (a dynamic tile scheduler; codegen/plan_persistent_grid.h; matmul, FA2 forward; the attention
//   backward's dK/dV and dQ take the static grid only).
// - LAZY_RESCALE: 1 has FA2's online softmax move a row's running max only when the row's max grows by more
//   than 2^8 (P then stays at most 256), and the code generator skip the accumulator's rescale in a warp whose
//   rescale factors are all 1 (codegen/plan_rescale_skips.h; FA2 forward).
// - TILE_BARRIERS: 1 gives each tile of a warp-specialised kernel's ring slot its own full and empty mbarrier, so
//   that a tile goes back to the producer once its own readers are done (with LAST_PRODUCT_LATE, FA2's K an
//   iteration before V) and the consumers wait for each tile where it is loaded (codegen/plan_tile_barriers.h; FA2
//   forward).
// - PRODUCTS_IN_ORDER: 1 has each loop's tensor-core products issued where the program computes them (each still
//   waited for at its first reader) instead of as early as their operands allow, so that fewer accumulators are in
//   flight at once: for tiles whose registers the early issue overfills (codegen/schedule_products.h; dK/dV).
// - EXP2_ON_FMA: K >= 1 has one of every K registers of an f32 exp2 tile computed by a polynomial on the FMA
//   pipe instead of the multi-function unit (codegen/plan_exp2_on_fma.h; FA2 forward); 0: none.
// Where the target or the kernel does not allow WARP_SPECIALIZE, PINGPONG, PRODUCT_AHEAD, LAST_PRODUCT_LATE,
// TILE_BARRIERS or PERSISTENT, the kernel is generated as
// with 0, `--stage lowered` says why, and the autotuner prunes the config.
#pragma once

#include "dsl/registry.h"

namespace kiln {

// Each parameter's definition, with the kernel's own default.
ParamDef min_blocks_per_sm_param(int64_t default_value);
ParamDef warp_specialize_param(int64_t default_value);
ParamDef pingpong_param(int64_t default_value);
ParamDef product_ahead_param(int64_t default_value);
ParamDef last_product_late_param(int64_t default_value);
ParamDef persistent_param(int64_t default_value);
// PERSISTENT for kernels that offer the static grid only (the attention backward's: its dynamic grid is not built
// for them, and under a producer ptxas serialises dQ's products there, C7520).
ParamDef static_persistent_param(int64_t default_value);
ParamDef lazy_rescale_param(int64_t default_value);
ParamDef exp2_on_fma_param(int64_t default_value);
ParamDef tile_barriers_param(int64_t default_value);
ParamDef products_in_order_param(int64_t default_value);

} // namespace kiln
