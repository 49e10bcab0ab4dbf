// Pass: write the CUDA C++ of a kernel whose lowering plan the passes before it have filled.
// The output calls the device prelude for every hardware-specific piece (mma, ldmatrix, cp.async,
// conversions); what is emitted here is the per-thread arithmetic over register arrays. The emitter decides
// nothing: layouts, conversions, scratch, instructions and waits all come from the plan.
#pragma once

#include "codegen/assign_layouts.h"

namespace kiln {

// The __global__ function and the device helpers it needs, without the prelude.
[[nodiscard]] std::string emit_cuda(const Kernel& k, const LoweringPlan& plan, const Target& target,
                      const CodegenOptions& options);

} // namespace kiln
