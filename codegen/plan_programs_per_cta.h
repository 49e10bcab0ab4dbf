// Pass: several programs a CTA (ProgramsPerCta in codegen/lowering_plan.h). Runs after plan_scratch, which sizes
// the shared memory each program's copy needs.
//
// A config asks for it with PROGRAMS_PER_CTA=2. It is done when CodegenOptions allow it, the kernel is
// warp-specialised (plan_warp_specialization) on a persistent grid (plan_persistent_grid), without ping-pong turns
// (those order one program's own warpgroups), and the CTA's threads stay within 1024. The registers the producer
// releases are then shared by both programs' consumers. Otherwise ProgramsPerCta::why_not says why and the kernel
// is generated as with one program a CTA.
#pragma once

#include "codegen/codegen.h"
#include "codegen/lowering_plan.h"

namespace kiln {

void plan_programs_per_cta(const Kernel& k, const Target& target, const CodegenOptions& options,
                           LoweringPlan& plan);

} // namespace kiln
