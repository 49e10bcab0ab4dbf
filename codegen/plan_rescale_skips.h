// Pass: a loop's accumulator rescaled by a row factor that is usually exactly 1 skips the multiply in a warp whose
// factors are all 1 (RescaleSkips in codegen/lowering_plan.h). Runs after assign_layouts; reads placements and
// layouts only.
//
// A config asks for it with LAZY_RESCALE=1 (FA2's forward: the running max then moves only when a row's max grows
// by more than 2^8, so O's rescale by exp2(m_old − m_new) is 1 wherever the max stays; kernels/codegen_params.h). The pass
// takes every f32 multiply, in a for loop's body, of a value the loop carries by a broadcast of a vector of at most
// 4 registers a thread (read in its own layout, so a thread's factors are its own registers), whose product is the
// accumulator of a dot in the same body: `acc = dot(p, v, acc * alpha[:, None])`. A warp whose threads' factors are
// all exactly 1 (one vote, so the branch is uniform) copies the accumulator instead (x · 1 = x for every float):
// measured on the H200 the branch costs up to 5 % at D = 64 without a causal mask, gains under 1 % with one and 2 %
// at D = 128 (worklog §72, §73), so it is the config's choice, never the default. Where the config asks and no
// multiply matches, RescaleSkips::why_not says so.
#pragma once

#include "codegen/lowering_plan.h"
#include "dsl/ir.h"

namespace kiln {

void plan_rescale_skips(const Kernel& k, LoweringPlan& plan);

} // namespace kiln
