// Pass: the reductions no barrier has to order before the program's later loads
// (LoweringPlan::unordered_reductions).
//
// A program may read back what its own threads stored (FA1 reads O back), so the emitter puts a CTA barrier
// (the consumers' named barrier when warp-specialised) between a global write and the next global load
// (Emitter::order_global_memory). A reduction (an atomic add whose old values nothing reads, through a tensor of
// pointers or a block pointer) through parameters that no read of the kernel goes through can never be read
// back by the program, so nothing that barrier would order is ever observed: the reduction is left unordered.
// dK/dV's atomic dQ was so ordered before each query step's loads, one barrier over both consumer warpgroups a
// step for nothing (worklog §84). Plain stores keep their barrier: left unordered the same way, the persistent
// grids' epilogue stores would lose one a tile, and the GPU has not yet run them so.
#pragma once

#include "codegen/lowering_plan.h"

namespace kiln {

void plan_unordered_reductions(const Kernel& k, LoweringPlan& plan);

} // namespace kiln
