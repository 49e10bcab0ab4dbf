// Pass: write the CUDA C++ of a kernel whose values have been placed by assign_layouts.
// The output calls the device prelude for every hardware-specific piece (mma, ldmatrix, cp.async,
// conversions); what is emitted here is the per-thread arithmetic over register arrays.
#pragma once

#include "codegen/assign_layouts.h"

namespace kiln {

struct EmittedKernel {
  std::string body;          // the __global__ function, without the prelude
  int64_t scratch_bytes = 0; // shared memory for layout conversions and cross-warp reductions
  int conversions = 0;       // layout conversions through shared memory (should be few)
  // One line per conversion: the value, the DSL line of the op that needed it, the two layouts (with their
  // bases when their summaries agree).
  std::vector<std::string> conversion_notes;
};

EmittedKernel emit_cuda(const Kernel& k, const LoweringPlan& plan, const Target& target,
                        const CodegenOptions& options);

} // namespace kiln
