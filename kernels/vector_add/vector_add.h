// Vector add, out = x + y: the smallest kernel, and a bandwidth probe.
#pragma once

#include "dsl/registry.h"

namespace kiln {

Kernel build_vector_add(const Config& config); // params: BLOCK; args: x, y, out (f32), n
KernelDef vector_add_def();
void vector_add_reference(const float* x, const float* y, float* out, int64_t n);

} // namespace kiln
