// Pass: ping-pong between consumer warpgroups (PingPong in codegen/lowering_plan.h). Runs after
// plan_warp_specialization.
//
// A config asks for it with PINGPONG=1. It is done when CodegenOptions allow it, the kernel is warp-specialised
// (plan_warp_specialization) with two or more consumer warpgroups, and its specialised loops hold at least one
// product on wgmma. Every wgmma product inside those loops is then issued in turn. The rotation needs every
// consumer warpgroup to issue the same products the same number of times, which holds because kiln's control
// flow is uniform across a program (loop bounds and if conditions are scalars). Otherwise PingPong::why_not says
// why and the kernel is generated as before.
#pragma once

#include "codegen/codegen.h"
#include "codegen/lowering_plan.h"

namespace kiln {

void plan_pingpong(const Kernel& k, const CodegenOptions& options, LoweringPlan& plan);

} // namespace kiln
