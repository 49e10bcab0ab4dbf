// The "autotune" suite: issue 5's performance checks of the autotuner on FA2 forward (f16, B = 4, H = 32,
// N = 4096, D = 64, not causal; the sweep's shape the worklog tuned), each tuning run in a fresh process
// (kiln_bench as a child, see child_probe.h) over a fresh cache directory:
//   kiln_tune_cold:           the whole config space tuned with an empty compile cache (every candidate
//                             compiled by NVRTC, in parallel): select()'s time, target < 30 s;
//   kiln_tune_warm_compile:   tuned again (mode force) with the compiled candidates on disk: the timing
//                             part of tuning, plus loading;
//   kiln_tune_cached_start:   select() in a new process with the result on disk and nothing in memory
//                             (mode cached): what a later process pays, target < 20 ms (median of a few);
//   kiln_tune_vs_exhaustive:  every config of the space checked and timed here (more repetitions than the
//                             tuner uses), the tuner's pick against the fastest: within 3 %.
// The tuned kernel's output is checked against the reference in every run.
#pragma once

#include "bench/bench_session.h"
#include "bench/child_probe.h"

#include <vector>

namespace kiln::bench {

std::vector<BenchCase> autotune_cases(const BenchOptions& options);

// The child's side (--probe=tune --probe-mode=force|cached): one timed KernelTuner::select into a.dir.
int run_tune_probe(const ProbeArgs& a);

} // namespace kiln::bench
