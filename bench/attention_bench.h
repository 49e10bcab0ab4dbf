// The attention benchmark cases: the FA2/FA1 sweep over the shapes the peers are measured on
// (B·N = 16384, H·D = 2048, N from 1024 to 16384, f16/bf16, D 64/128, causal and not, plus one long
// single head) and the "seeds" experiments (short single heads, K read transposed vs row-major, f32
// exact vs tf32). Also the pieces other suites build attention cases from: one case from a spec, the
// shared device inputs, and the check against the double-precision reference.
#pragma once

#include "bench/bench_session.h"

#include "kernels/attention/attention_problem.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln::bench {

std::vector<BenchCase> attention_cases(const BenchOptions& options);
std::vector<BenchCase> seed_cases(const BenchOptions& options);

// The sweep's problem: B = 16384 / N, H = 2048 / D, N_Q = N_K = N.
AttentionProblem sweep_problem(DType dtype, int64_t N, int64_t D, int causal);
AttentionProblem single_problem(DType dtype, int64_t B, int64_t H, int64_t N, int64_t D, int causal);

// Inputs on host and device for the most recent (dtype, sizes): consecutive cases of one dtype and size
// share one upload. One per suite.
class AttentionDataCache;
std::shared_ptr<AttentionDataCache> make_attention_data_cache();

struct AttentionCaseSpec {
  std::string suite, system, note;
  AttentionProblem problem;
  bool fa1 = false;
  // nullopt: default_fa1_config, or default_fa2_config with --config applied.
  std::optional<Config> config;
  // With --tune (and no --config), FA2 runs the autotuner's pick for the shape, as attention::forward does.
  // Suites that study one config (ablation, model) set this false.
  bool tunable = true;
  CodegenOptions codegen;
};
// A case that runs the kernel once on NaN-poisoned outputs, checks O and LSE against the reference, and
// only then times it.
BenchCase attention_case(const AttentionCaseSpec& spec, const BenchOptions& options,
                         const std::shared_ptr<AttentionDataCache>& cache);

// FA2's inputs on the device with NaN-poisoned outputs and the launch arguments in the kernel's order,
// for suites that pick their own kernels (the autotuner's candidates).
struct Fa2DeviceProblem {
  AttentionProblem problem;
  AttentionInputs host;
  rt::DeviceBuffer q, k, v, o, lse;
  std::vector<LaunchArg> args;

  // The arguments the kernel writes (O and LSE), for KernelTuner::select.
  std::vector<OutputArg> outputs() const;
  // Refills O and LSE with NaN, so that the next check sees only what the next launch writes.
  void poison_outputs();
  // O and LSE as they are on the device, against the reference (sampled rows for large problems).
  CheckResult check(uint64_t seed) const;
};
std::unique_ptr<Fa2DeviceProblem> make_fa2_device_problem(const AttentionProblem& p, uint64_t seed);

} // namespace kiln::bench
