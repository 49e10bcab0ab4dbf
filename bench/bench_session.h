// The benchmark run: options, the list of cases, one compiled kernel per distinct config, and the
// rule every case follows: compile, run once on poisoned outputs, check against the reference, and
// only then time (median of event-timed launches, repetitions capped by a per-case time budget).
#pragma once

#include "bench/bench_record.h"

#include "dsl/registry.h"
#include "jit/jit_kernel.h"
#include "jit/tuned_kernel.h"
#include "runtime/timing.h"

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace kiln::bench {

struct BenchOptions {
  bool quick = false;           // a small subset of every suite, for smoke runs
  int reps = 20;                // timed launches per case (at most; see case_budget_ms)
  int warmup = 3;               // untimed launches before them
  double case_budget_ms = 1500; // fewer reps (never below 3) when reps launches would take longer
  uint64_t seed = 20240607;     // inputs are random from this seed
  std::map<std::string, int64_t> fa2_overrides;    // --config NAME=V,... applied to every FA2 case
  std::map<std::string, int64_t> matmul_overrides; // --matmul-config
  std::string filter;                              // run only cases whose key or system contains this
  bool tune =
      false; // FA2 cases run the autotuner's pick for their shape (what kiln::attention::forward uses)
  // The compile suite without a GPU: compile for this target and skip loading ("" = the device's arch).
  std::string arch;
  // The attention_bwd suite: tune the backward's dK/dV and dQ kernels per shape too (--tune-bwd; without it
  // they run default_bwd_configs, and only the forward follows --tune).
  bool tune_bwd = false;
  // --switch-off NAME: the attention sweep's and the seeds' FA2 and FA1 cases with one code-generator switch off
  // (an ablation variant's options), for an A/B of any sweep shape or config against a run without it.
  CodegenOptions sweep_codegen;
};

class Session;

// One case: its identity and work (in `record`), the kernel, config and code-generator switches it runs,
// and the body that checks and times it on the GPU.
struct BenchCase {
  CaseRecord record;
  KernelDef def;
  Config config;
  CodegenOptions codegen; // all on except in the ablation suite
  std::function<void(Session&, const JitKernel&, CaseRecord&)> run;
  // Further kernels the case launches beside `def` (the backward's several kernels), at the configs it runs
  // them with when not tuning: --precompile compiles them too.
  std::vector<std::pair<KernelDef, Config>> more_kernels;
  // Cases that manage their own kernels and processes (compile latency, autotuning) leave `def` empty and
  // set this instead of `run`: nothing is compiled for them beforehand, and --precompile skips them.
  std::function<void(Session&, CaseRecord&)> run_self;
};

class Session {
public:
  explicit Session(BenchOptions options) : options_(std::move(options)) {}
  const BenchOptions& options() const { return options_; }
  // The autotuner cases use with --tune (results beside the compile cache, like forward()'s).
  KernelTuner& tuner() { return tuner_; }

  // The kernel for (def, config, codegen), compiled for the current device once per run.
  const JitKernel& kernel(const KernelDef& def, const Config& config, const CodegenOptions& codegen = {});
  // Generates and compiles (through the on-disk cache) for `arch` without loading: warms the cache,
  // and on a machine with no GPU shows that every config compiles.
  static void precompile(const KernelDef& def, const Config& config, const CodegenOptions& codegen,
                         const std::string& arch);

  // Runs a case end to end; a kiln::Error (compile failure, launch failure, ...) is recorded on the case
  // rather than ending the run.
  void run_case(BenchCase& c);

  // What a case launches: with --tune, when `tunable`, the autotuner's pick for the shape's bucket (tuned
  // on a miss on scratch copies of `outputs`, remembered after; its config goes into r.config), as
  // attention::forward picks, generated with `codegen` (as `k` was); otherwise `k` at the case's config. `tuned`
  // owns the picked kernel.
  struct Launch {
    const JitKernel* kernel = nullptr;
    Grid grid;
    std::optional<TunedLaunch> tuned;
  };
  Launch launch_for(const KernelDef& def, const Config& config, const JitKernel& k, const SizeArgs& sizes,
                    const std::vector<LaunchArg>& args, const std::vector<OutputArg>& outputs, bool tunable,
                    CaseRecord& r, const CodegenOptions& codegen = {});

  // The median time of `launch` into r.time_ms, with reps adapted to the case budget.
  void time(CaseRecord& r, const std::function<void(rt::Stream&)>& launch, bool flush_l2);

private:
  KernelTuner tuner_;
  BenchOptions options_;
  std::map<std::string, std::shared_ptr<JitKernel>> kernels_;
};

// Parses "NAME=V,NAME=V" (integers) into overrides; a kiln::Error naming the bad item.
std::map<std::string, int64_t> parse_overrides(const std::string& text, const std::string& option);

} // namespace kiln::bench
