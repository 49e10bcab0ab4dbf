// The attention benchmark cases: the FA2/FA1 sweep over the shapes the peers are measured on
// (B·N = 16384, H·D = 2048, N from 1024 to 16384, f16/bf16, D 64/128, causal and not, plus one long
// single head) and the "seeds" experiments (short single heads, K read transposed vs row-major, f32
// exact vs tf32).
#pragma once

#include "bench/bench_session.h"

#include <vector>

namespace kiln::bench {

std::vector<BenchCase> attention_cases(const BenchOptions& options);
std::vector<BenchCase> seed_cases(const BenchOptions& options);

} // namespace kiln::bench
