// Tutorial 11's kernel (docs/tutorials/11_matmul_bias_gelu.md): C = GELU(A @ B + bias) for f16 A [M, K],
// B [K, N], bias [N] and C [M, N], f32 accumulation, the bias and the (exact, erf) GELU fused into the
// epilogue; registered with its tensor shapes and a double-precision reference.
#pragma once

#include <kiln/kiln.h>

namespace tutorial {

kiln::Kernel build_matmul_bias_gelu(const kiln::Config& config);
kiln::KernelDef matmul_bias_gelu_def();
// C = gelu(A @ B + bias), gelu(z) = z / 2 * (1 + erf(z / sqrt(2))), in double.
kiln::ReferenceOutputs matmul_bias_gelu_reference(const kiln::ReferenceInputs& in);

} // namespace tutorial
