// The "user" suite: the tutorials' kernels (examples/kernels/), written as a user writes theirs, at the
// issue's shapes: LayerNorm forward of 16384 x 4096 f16 and online logsumexp of 16384 x 32768 f16 (GB/s,
// beside peers.py's device copy and torch's layer_norm / logsumexp) and matmul + bias + GELU at 4096^3 f16
// (TFLOP/s, beside torch's matmul, bias add and GELU, and kiln's own plain matmul, which this suite times right
// after the fused kernel and as it is: "kiln_plain_matmul"). Inputs are random, laid
// out by the launch plan (as `kiln tune` makes them); each case is checked first, at the same config on a
// smaller problem, against the kernel's registered double-precision reference (the full problem's reference
// would take minutes on the host), then timed with L2 flushed.
#pragma once

#include "bench/bench_session.h"

#include <vector>

namespace kiln::bench {

std::vector<BenchCase> user_kernel_cases(const BenchOptions& options);

} // namespace kiln::bench
