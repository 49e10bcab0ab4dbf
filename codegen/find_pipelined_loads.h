// Part of assign_layouts (codegen/assign_layouts.h), after every value is placed: which block loads a loop
// pipelines through its shared ring. A loop-carried block pointer advanced by a loop-invariant step is loaded
// num_stages deep: a loop's dot operand tiles, and its row vectors where a producer warpgroup copies the ring
// (read at each use; worklog §88); in a loop with no dot tiles (a streaming loop), its 2-D block loads into
// registers (SharedTile::to_registers). Fills LoweringPlan::pipelined and pipelined_steps, and adds the staged
// loads' tiles.
#pragma once

#include "codegen/codegen.h"
#include "codegen/lowering_plan.h"
#include "codegen/target.h"

namespace kiln {

void find_pipelined_loads(const Kernel& k, const Target& target, const CodegenOptions& options, LoweringPlan& plan);

} // namespace kiln
