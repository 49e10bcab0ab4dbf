// The matmul benchmark cases: f16/bf16 squares from 1024 to 8192 and skinny shapes, row-major A, B, C,
// measured against torch.matmul (cuBLAS) by peers.py on the same keys.
#pragma once

#include "bench/bench_session.h"

#include <vector>

namespace kiln::bench {

std::vector<BenchCase> matmul_cases(const BenchOptions& options);

} // namespace kiln::bench
