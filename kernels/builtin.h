// The kernels that ship with kiln, registered by name for the tools, tests and benchmarks.
#pragma once

#include "dsl/registry.h"

namespace kiln {

const KernelRegistry& builtin_kernels();

} // namespace kiln
