// Pass: the scratch shared memory (LoweringPlan::scratch_bytes), decided before any CUDA is written so that a
// kernel that needs more shared memory than its target has is refused up front. Scratch follows the tiles (at
// LoweringPlan::tiles_bytes) and is reused by every op that needs it, one at a time: conversions through shared
// memory (the sizes plan_layout_conversions recorded), reductions whose warps combine their partial results,
// scans (the whole tile), and FMA dots that stage register operands. Each use starts with a barrier, except a
// cross-warp reduction that follows a barrier or another reduction in straight-line code: the reductions get
// two slots when there are two or more of them, taken in turn (LoweringPlan::reduction_slots). It is sized as
// the largest use. Runs after plan_layout_conversions.
#pragma once

#include "codegen/lowering_plan.h"

namespace kiln {

void plan_scratch(const Kernel& k, LoweringPlan& plan);

// Bytes a reduction of a tile in layout `in` along `axis` exchanges between warps: each warp's partial
// results (at least 4 bytes an element), followed for an argmax by their indices. 0 when no warp bit moves
// along the axis.
int64_t cross_warp_reduction_bytes(const Layout& in, int axis, DType t, bool argmax);
// Bytes an FMA dot stages its operands in when one is not a shared tile: A then B, row-major.
int64_t fma_staging_bytes(const Kernel& k, const Op& dot);
// Whether `op`, where it is emitted, writes the scratch: a conversion through shared memory it reads (not one
// hoisted before its loop), a reduction across warps, a scan or sort, an FMA dot that stages an operand. Needs
// plan_layout_conversions' plan.
bool uses_scratch(const Kernel& k, const LoweringPlan& plan, const Op& op);

} // namespace kiln
