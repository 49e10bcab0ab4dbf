// The MIN_BLOCKS_PER_SM compile-time parameter that FA2, matmul and softmax share: the second
// __launch_bounds__ argument the code generator emits (codegen/codegen.h), capping registers per thread
// so that that many CTAs can be resident on one SM. Their tuning spaces vary it.
#pragma once

#include "dsl/registry.h"

namespace kiln {

// The parameter's definition, with the kernel's own default.
ParamDef min_blocks_per_sm_param(int64_t default_value);

} // namespace kiln
