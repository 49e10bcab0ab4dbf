// What `kiln attention`, `kiln compare-loads` and `kiln demo` share: option spellings of the causal modes,
// attention FLOPs, host tensors copied to and from the GPU, timing FA2 on the GPU (median, min, max over repeated
// launches), and the autotuner's pick for a problem.
#pragma once

#include "jit/tuned_kernel.h"
#include "kernels/attention/attention_mods_host.h"
#include "kernels/attention/attention_problem.h"
#include "runtime/device.h"
#include "tools/kernel_problem.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace kiln {
struct HostBlockMask; // attention_block_mask_host.h
} // namespace kiln

namespace kiln::cli {

// "none" | "top-left" | "bottom-right" -> the CAUSAL param; a kiln::Error naming `flag` otherwise.
int parse_causal(const std::string& text, const char* flag);
const char* causal_name(int causal);
// "f16" | "bf16" | "f32" (the dtypes FA2 runs in).
DType parse_attention_dtype(const std::string& text, const char* flag);


// A device copy of `b` (at least 16 bytes, so that an empty tensor still gets an address), and `numel` elements of
// `dtype` copied back from `d`.
rt::DeviceBuffer upload(const HostBuffer& b);
HostBuffer download(const rt::DeviceBuffer& d, DType dtype, int64_t numel);

struct GpuTiming {
  double median_ms = 0, min_ms = 0, max_ms = 0;
  int reps = 0;
};

// Median, min and max of timed runs (at least one).
GpuTiming timing_of(std::vector<double> ms);

// `kiln attention`'s --bench line: "bench[ WHAT]: median ... ms (min ..., max ..., N runs), ... TFLOP/s" for
// `t` at `flops` (WHAT empty: no name).
std::string bench_line(const std::string& what, const GpuTiming& t, double flops);

// The GPU time of `fn` (host API calls on the legacy default stream, returning with their work enqueued or
// done), `reps` times after one untimed call (which may tune), each between two events.
GpuTiming time_gpu_calls(const std::function<void()>& fn, int reps);

// Compiles FA2 for `config` (with `mods`: fa2_fwd_def(mods), reading `mod_tensors`; with `block_mask`,
// fa2_fwd_block_mask_def(mods) over its lists), copies the inputs to the GPU once, and times `reps` launches
// (after `warmup` untimed ones) with rt::time_kernel_runs_ms, back to back as kiln_bench and the autotuner time
// them (a wait for each launch before the next measured other speeds: worklog §75).
GpuTiming time_fa2_on_gpu(const AttentionProblem& p, const Config& config, const AttentionInputs& in,
                          int warmup, int reps, const AttentionMods& mods = {},
                          const ModTensorValues& mod_tensors = {}, const HostBlockMask* block_mask = nullptr);

// The autotuner's choice for the problem, as kiln::attention::forward makes it (KILN_AUTOTUNE decides
// whether it tunes, unless `mode` is given), on device copies of the inputs: tuning writes scratch outputs only.
TunedLaunch autotuned_launch(const AttentionProblem& p, const AttentionInputs& in,
                             std::optional<rt::AutotuneMode> mode = std::nullopt);

} // namespace kiln::cli
