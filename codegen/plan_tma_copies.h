// Pass: which pipelined loops copy their shared tiles with TMA (codegen/tma_plan.h), and the tensor maps
// the kernel takes for them. Runs after plan_shared_memory (tile offsets) and schedule_async_copies.
//
// A loop is copied by TMA when the target has it (sm_90a), cp.async staging and swizzling are on, and
// every one of its pipelined loads qualifies: zero padding; a 2-D tile of 2- or 4-byte elements whose
// lines are 32, 64 or 128 bytes (a swizzle TMA writes exactly as kiln's shared tile format wants), at most
// 256 rows, stages of whole 1024-byte swizzle periods; and a block pointer traced through advances and
// loop-carried values to one make_block_ptr whose base is a pointer parameter plus bounded per-program terms
// (codegen/block_base.h: each one more dim of the map) and whose shape and strides are parameters or constants.
// A staged row vector (a warp-specialised loop's; codegen/find_pipelined_loads.h) is one unswizzled copy of the whole vector
// (why_no_tma_copy_of_vector). Otherwise the loop stays on cp.async and TmaPlan::why_not says why.
#pragma once

#include "codegen/codegen.h"
#include "codegen/lowering_plan.h"

namespace kiln {

void plan_tma_copies(const Kernel& k, const Target& target, const CodegenOptions& options, LoweringPlan& plan);

// Why block load `load` into shared tile `t` cannot be one TMA copy per 128-byte column panel ("" when it can; the
// block pointer's map is tensor_map_for's question): the conditions above on the tile and the padding.
std::string why_no_tma_copy_of_tile(const Kernel& k, const Op& load, const SharedTile& t);

// Why staged row vector `t` (one row of 2- or 4-byte elements) cannot be one TMA copy ("" when it can): at most
// 256 elements, in slots of whole 128-byte lines (the alignment TMA writes to).
std::string why_no_tma_copy_of_vector(const SharedTile& t);

} // namespace kiln
