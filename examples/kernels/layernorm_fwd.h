// Tutorial 10's kernel (docs/tutorials/10_layernorm.md): a row-wise LayerNorm forward over an [n_rows,
// n_cols] f16 matrix, f32 statistics, registered with its tensor shapes and a double-precision reference so
// that a user's tool runs and checks it (`run layernorm_fwd --check`).
#pragma once

#include <kiln/kiln.h>

namespace tutorial {

kiln::Kernel build_layernorm_fwd(const kiln::Config& config);
kiln::KernelDef layernorm_fwd_def();
// y[r, :] = (x[r, :] - mean_r) / sqrt(var_r + eps) * weight + bias, in double.
kiln::ReferenceOutputs layernorm_fwd_reference(const kiln::ReferenceInputs& in);

} // namespace tutorial
