// Pass: a persistent grid (PersistentGrid in codegen/lowering_plan.h). Runs after plan_warp_specialization.
//
// A config asks for it with PERSISTENT=1. It is done when CodegenOptions allow it and the kernel reads its
// program id only along x (program_id(0), num_programs(0)): the launch then starts MIN_BLOCKS_PER_SM CTAs an
// SM (at most the grid's x size) and each walks the program ids from blockIdx.x in steps of gridDim.x. The
// DSL program's own order of program ids (matmul's grouped rasterisation) is the order the wave takes them
// in, so CTAs that run at once still share their tiles in L2. Otherwise PersistentGrid::why_not says why and
// the kernel is generated as before.
#pragma once

#include "codegen/codegen.h"
#include "codegen/lowering_plan.h"

namespace kiln {

void plan_persistent_grid(const Kernel& k, const CodegenOptions& options, LoweringPlan& plan);

} // namespace kiln
