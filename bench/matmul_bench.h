// The matmul benchmark cases: f16/bf16 squares from 1024 to 8192 and skinny shapes, row-major A, B, C,
// measured against torch.matmul (cuBLAS) by peers.py on the same keys.
#pragma once

#include "bench/bench_session.h"

#include "kernels/matmul/matmul.h"

#include <string>

#include <vector>

namespace kiln::bench {

std::vector<BenchCase> matmul_cases(const BenchOptions& options);

// One matmul case (default_matmul_config with --matmul-config applied), checked on sampled entries of C
// before it is timed; with `flush_l2`, L2 is flushed before every timed launch (as the user suite times).
BenchCase matmul_case(const MatmulProblem& p, const BenchOptions& options, const std::string& suite,
                      const std::string& system, const std::string& note = {},
                      const CodegenOptions& codegen = {}, bool flush_l2 = false);

} // namespace kiln::bench
