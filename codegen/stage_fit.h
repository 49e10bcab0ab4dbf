// Whether a shared-memory stage placed after the rest of a CTA's shared memory fits (plan_bulk_reductions'
// stages, plan_tma_stores' stage): within the target's bytes a block, and without keeping the CTAs the config's
// MIN_BLOCKS_PER_SM asks to share an SM from fitting there where they fit without it (Target::ctas_by_shared_memory,
// which occupancy and the tuner's prune ask too).
#pragma once

#include "codegen/lowering_plan.h"
#include "codegen/target.h"

#include <string>

namespace kiln {

// Why `bytes` of stage at `offset` do not fit ("" where they do); the messages name the stage (`stage`: "its
// stage") and what lies before it (`beside`: "the tiles and the scratch").
std::string why_stage_does_not_fit(const Kernel& k, const Target& target, const LoweringPlan& plan, int64_t offset,
                                   int64_t bytes, const char* stage, const char* beside);

} // namespace kiln
