// Tutorial 12's kernel (docs/tutorials/12_online_logsumexp.md): out[r] = log(sum_c exp(x[r, c])) over long
// f16 rows, read in BLOCK_N chunks with a running maximum and a rescaled running sum (the online softmax's
// statistics, in one pass); registered with its tensor shapes and a double-precision reference.
#pragma once

#include <kiln/kiln.h>

namespace tutorial {

kiln::Kernel build_online_logsumexp(const kiln::Config& config);
kiln::KernelDef online_logsumexp_def();
// out[r] = max_r + log(sum_c exp(x[r, c] - max_r)), in double.
kiln::ReferenceOutputs online_logsumexp_reference(const kiln::ReferenceInputs& in);

} // namespace tutorial
