// Pass: the scalars the generated code shows ptxas to be warp-uniform (WarpUniformScalars in
// codegen/lowering_plan.h). Runs after choose_dot_lowering; reads the dots' instructions and the placements.
//
// A DSL scalar is the program's, the same in every thread, but ptxas cannot know that of a value loaded from
// memory, nor, as it turned out, of a loop bound computed from kernel parameters. A loop whose bound it cannot
// prove warp-uniform is a possibly divergent path to it, and there it puts every wgmma of the kernel in series
// (info C7520): over a block mask's loaded ranges (worklog §47, 15–18 %), over the deterministic dK/dV's last
// query loop, bounded by N_Q (§91, §92: 5–25 %). On a target that issues wgmma, the emitter therefore passes
// through kiln::warp_uniform (codegen/prelude/kiln_warp_uniform.cuh: the warp's redux.sync maximum, which is the
// value and which ptxas knows to be uniform):
//   - every scalar load;
//   - each non-constant bound of every loop whose body, at any depth, issues a wgmma product, once before the loop.
// Not in a warp-specialised kernel's producer, whose copies one thread issues alone: the emitter leaves both plain
// there (a warp-wide reduction would wait for lanes that never come). CodegenOptions::warp_uniform = false leaves
// every scalar plain, to measure what this is worth.
#pragma once

#include "codegen/codegen.h"
#include "codegen/lowering_plan.h"
#include "dsl/ir.h"

namespace kiln {

void plan_warp_uniform_scalars(const Kernel& k, const CodegenOptions& options, LoweringPlan& plan);

} // namespace kiln
