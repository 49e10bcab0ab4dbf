// The WARP_SPECIALIZE compile-time parameter of kernels with a TMA-copied main loop (matmul): 1 asks the code
// generator for a producer warpgroup that issues the loop's copies while the num_warps warps compute
// (codegen/plan_warp_specialization.h). Where the target or the kernel does not allow it, the kernel is
// generated as with 0 and `--stage lowered` says why. Tuning spaces vary it.
#pragma once

#include "dsl/registry.h"

namespace kiln {

ParamDef warp_specialize_param(int64_t default_value);

} // namespace kiln
