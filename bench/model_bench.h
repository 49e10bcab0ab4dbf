// The "model" suite: the performance model of analysis/perf_model.h against the GPU. FA2 forward (f16,
// D = 64, not causal, the sweep's shapes B·N = 16384, H = 32) over a few tile sizes (BLOCK_M × BLOCK_N)
// and sequence lengths: the roofline time the model predicts from the IR (FLOPs and bytes against the
// device's nominal peaks) beside the measured time of the same config, checked first like every case.
// report.py turns the records into a table and docs/bench/<device>-model.png.
#pragma once

#include "bench/bench_session.h"
#include "runtime/device.h"

#include "kernels/attention/attention_problem.h"

#include <llvm/Support/JSON.h>

#include <vector>

namespace kiln::bench {

std::vector<BenchCase> model_cases(const BenchOptions& options);

// The model's prediction for FA2 on `p` with `config` against `peaks`: FLOPs, bytes, compute and memory
// times, the predicted (roofline) time and the bound, as the record's extra fields. CPU only.
llvm::json::Object predict_fa2(const AttentionProblem& p, const Config& config, const rt::PeakRates& peaks);

} // namespace kiln::bench
