// Pass: decide where every value lives before any CUDA is written.
//   - scalars are plain C++ variables, block pointers small structs;
//   - "flexible" tiles (constants, aranges, broadcasts, index arithmetic on them) are computed wherever
//     they are used, directly in the user's layout, so they never need a conversion;
//   - the warps split every dot's tile alike (LoweringPlan::warps), but for dots with fewer rows than that
//     split spreads over, which take one of their own (LoweringPlan::dot_warps; choose_warp_splits.h);
//   - dot results take the mma accumulator layout; reductions the slice of their input; elementwise
//     ops the layout of their most constrained operand; loads a coalesced blocked layout;
//   - block-pointer loads used only as dot operands stay in (swizzled) shared memory, and those of a
//     loop-carried block pointer advanced by a loop-invariant step are pipelined num_stages deep (with the
//     register loads a loop stages through its ring: codegen/find_pipelined_loads.h).
#pragma once

#include "codegen/codegen.h"
#include "codegen/lowering_plan.h"
#include "codegen/target.h"

namespace kiln {

LoweringPlan assign_layouts(const Kernel& k, const Target& target, const CodegenOptions& options);

// Pass: lay the shared tiles out (1024-byte aligned); returns the bytes used. A loop's tiles are dead once it
// ends, so sibling loops (top-level or nested in the same loop) share space, while a tile loaded in a loop's
// own body stays clear of the loops nested in it.
int64_t plan_shared_memory(LoweringPlan& plan);

} // namespace kiln
