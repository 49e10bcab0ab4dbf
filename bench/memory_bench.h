// The memory-bound benchmark cases: vector_add (f32) and row softmax, reported in GB/s of bytes read plus
// bytes written, with L2 flushed before every timed launch; peers.py measures a device-to-device copy as
// the ceiling they are compared with.
#pragma once

#include "bench/bench_session.h"

#include "kernels/softmax/softmax.h"

#include <string>
#include <vector>

namespace kiln::bench {

std::vector<BenchCase> memory_cases(const BenchOptions& options);

// One row-softmax case (softmax_config), checked on sampled rows before it is timed with L2 flushed.
BenchCase softmax_case(const SoftmaxProblem& p, const std::string& suite, const std::string& system,
                       const std::string& note = {}, const CodegenOptions& codegen = {});

} // namespace kiln::bench
