// The "ablation" suite, an automatic worklog: the same kernel and config with each code-generator switch
// (CodegenOptions: tensor cores, swizzled shared memory, cp.async staging, 16-byte vectorised access)
// turned off in turn, beside all of them on, so that the report shows what each optimisation is worth on
// the GPU at hand. Workloads: the CUDA worklog's FA2 shape (one head, N_Q = N_K = 8192, D = 32, f32
// exact and tf32), FA2 f16 at B = 4, H = 32, N = 4096, D = 64, matmul f16 4096³, and row softmax f16
// 16384 × 4096 (memory-bound, where vectorised access matters). Every variant is checked against the
// reference before its time counts, exactly as the other suites' cases.
#pragma once

#include "bench/bench_session.h"

#include <string>
#include <vector>

namespace kiln::bench {

struct AblationVariant {
  std::string name; // "all_on", "no_tensor_cores", ...: the suffix of the record's system
  CodegenOptions options;
};

// All on first, then one switch off per variant.
std::vector<AblationVariant> ablation_variants();
// The options of the variant named `name` with its one switch off (kiln_bench --switch-off); a kiln::Error naming
// every such variant for any other name (all_on included: it turns nothing off).
CodegenOptions switched_off_options(const std::string& name);

std::vector<BenchCase> ablation_cases(const BenchOptions& options);

} // namespace kiln::bench
