// Pass: a persistent grid (PersistentGrid in codegen/lowering_plan.h). Runs after plan_warp_specialization.
//
// A config asks for it with PERSISTENT=1 (static) or 2 (dynamic). It is done when CodegenOptions allow it and the
// kernel reads its program id only along x (program_id(0), num_programs(0)): the launch then starts
// MIN_BLOCKS_PER_SM CTAs an SM (at most the grid's x size) and each runs program blockIdx.x first, then walks the
// program ids in steps of gridDim.x (static) or draws each next one from the launch's counter (dynamic: the CTA
// free first takes it; emit_persistent_grid.cpp). The DSL program's own order of program ids (matmul's grouped
// rasterisation) is the order the wave takes them in, so CTAs that run at once still share their tiles in L2.
// Otherwise PersistentGrid::why_not says why and the kernel is generated as before.
//
// A shared tile copied once a program, before its loops (FA2's Q), is prefetched: its own bytes (no other tile
// shares them), read last by a top-level op, read from a tensor the kernel never writes, and addressed by a block
// pointer made of top-level scalars that can be computed again for the next program id (program_scalars.h). The
// program then copies the next program's tile after that last reader and before its epilogue (PersistentPrefetch);
// where a tile does not qualify, why_not_prefetch says why and it is copied where the program starts, as before.
#pragma once

#include "codegen/codegen.h"
#include "codegen/lowering_plan.h"

namespace kiln {

void plan_persistent_grid(const Kernel& k, const CodegenOptions& options, LoweringPlan& plan);

} // namespace kiln
