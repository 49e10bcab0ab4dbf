// Autotuned launches of registered kernels: the glue between a KernelDef and the generic rt::Autotuner.
// For a kernel, a base config and the problem's sizes it builds the candidates (the base config with the tile
// params the kernel's config space varies), the tuning key (the kernel's tuning_key sizes, bucketed, plus the
// params the problem fixes: dtypes, flags, head dim), prunes by the kernel's rule and the device's
// shared-memory opt-in limit (from generated code, before any NVRTC compile), compiles in parallel, times on
// the GPU on the caller's inputs with every output redirected to a scratch copy, and remembers the pick.
#pragma once

#include "jit/jit_kernel.h"
#include "runtime/autotuner.h"
#include "runtime/compile_cache.h"
#include "runtime/timing.h"

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace kiln {

// The params config space `space` of `def` chooses, sorted: those whose values differ between its configs, and
// those every config sets to one value other than def's default (a space of BLOCK_N=4096 configs). The others
// are the problem's: tuning takes them from the base config and keys its results by them.
std::vector<std::string> tuned_params(const KernelDef& def, const std::vector<Config>& space);

// The configs to tune: `base` (the problem-fixed params set; unknown params are an Error) with each config of
// def.config_space()'s tuned params, num_warps and num_stages; {base} when the kernel has no space.
std::vector<Config> tuning_candidates(const KernelDef& def, const Config& base);

// "B=1 H=4 N_Q=1024 N_K=1024 | CAUSAL=0 DTYPE=0 ...": the kernel's tuning_key sizes through def.bucket, then,
// after a bar where there are any, base's params that the space does not tune. A size name outside
// def.size_args, or a tuning_key size missing from `sizes`, is a kiln::Error naming it and the valid names.
std::string tuning_key_text(const KernelDef& def, const SizeArgs& sizes, const Config& base);

// What tells candidate `c` from the others in a progress line: its tile params (BLOCK_M as BM, BLOCK_N as
// BN, ...), num_warps and num_stages, then any other param of `tuned` that is not at the kernel's default:
// "BM=128 BN=64 w=8 s=3", "BM=128 BN=64 w=8 s=2 MIN_BLOCKS_PER_SM=2".
std::string candidate_label(const KernelDef& def, const Config& c, const std::vector<std::string>& tuned);

// Why `config`, whose generated code needs `shared_bytes` of shared memory per block (dynamic and static), cannot
// run well on `device`, or "": more than the per-block opt-in limit, or MIN_BLOCKS_PER_SM blocks that cannot share
// one SM's shared memory, each with its reserved kilobyte (Target::ctas_by_shared_memory). The tuner's device-side
// prune, before any NVRTC compile.
std::string device_prune_reason(const Config& config, int64_t shared_bytes, const rt::DeviceInfo& device);

// A launch argument the kernel writes: tuning runs write a scratch copy of its memory instead, the `bytes`
// bytes from the argument's address plus the `bytes_before` bytes just below it (for kernels that reach
// below the address they are given).
struct OutputArg {
  size_t index = 0; // into the launch arguments
  size_t bytes = 0;
  size_t bytes_before = 0;
};

struct TuneOptions {
  std::optional<rt::AutotuneMode> mode; // nullopt: KILN_AUTOTUNE
  double flops = 0;                     // per launch, for TFLOP/s in the result table; 0: not reported
  double bytes = 0;                     // per launch, for GB/s in the result table; 0: not reported
  rt::TimingOptions timing;             // warm-up and repetitions per candidate
  std::string arch;                     // "": the current device's
  CodegenOptions codegen;
};

// The config chosen for one problem, loaded and ready to launch.
struct TunedLaunch {
  Config config;
  std::shared_ptr<JitKernel> kernel;
  Grid grid; // def.grid(config, sizes) for the exact (not bucketed) sizes
  // Where the choice came from, and the full table when there is one; never null. Shared with the tuner's
  // memory, so that a repeated call does not copy the table.
  std::shared_ptr<const rt::TuneResult> result;
};

class KernelTuner {
public:
  // Compiles through `compile_cache`; tuning results live beside it (<its dir>/tune).
  explicit KernelTuner(rt::CompileCache& compile_cache = rt::default_compile_cache(),
                       rt::AutotunerOptions options = {});

  // The config for (def, base, sizes): the default (`base` itself) with mode off, else a remembered result,
  // else (modes on and force) the fastest candidate timed on `args`. Picks are kept for this object's life,
  // so a repeated call with sizes in the same bucket neither tunes nor compiles; force re-tunes every call.
  // `outputs` name every pointer argument the kernel writes (tuning never writes the caller's buffers). A
  // repeated call is recognised by the def's name, `base`, the exact sizes and the device before the candidates
  // are built: two defs of one name must not share a tuner (kiln's own names say what differs, as the attention
  // mods' do).
  TunedLaunch select(const KernelDef& def, const Config& base, const SizeArgs& sizes,
                     const std::vector<LaunchArg>& args, const std::vector<OutputArg>& outputs,
                     const TuneOptions& options = {});

  // select(), then one launch of the chosen kernel on the caller's arguments.
  TunedLaunch launch(const KernelDef& def, const Config& base, const SizeArgs& sizes,
                     const std::vector<LaunchArg>& args, const std::vector<OutputArg>& outputs,
                     const TuneOptions& options = {}, const rt::Stream& stream = rt::Stream());

  // Counts the picks this object has remembered. In any mode but force, a repeated select() returns what it
  // returned before as long as this count is unchanged since before that earlier call, so a caller may keep
  // what it derived from the picks (the attention backward keeps its plan of three kernels) until it moves.
  uint64_t picks_version() const { return picks_version_.load(); }

  rt::Autotuner& autotuner() { return autotuner_; }
  rt::CompileCache& compile_cache() { return compile_cache_; }

private:
  struct Chosen {
    Config config;
    std::shared_ptr<JitKernel> kernel;
    std::shared_ptr<const rt::TuneResult> result;
  };

  // The pick remembered for the space key `space` in `mode`, or nullptr (mutex_ held).
  const Chosen* remembered(const std::string& space, rt::AutotuneMode mode) const;

  rt::CompileCache& compile_cache_;
  rt::Autotuner autotuner_;
  std::mutex mutex_;
  std::map<std::string, Chosen> chosen_; // by tuning-key hash (+ mode off's default)
  std::atomic<uint64_t> picks_version_{0}; // one more for every write to chosen_
  // A call's cheap inputs (kernel, base config, exact sizes, device, switches) -> the space key of chosen_ that
  // its candidates and bucketed tuning key hash to: a repeated call finds its pick without rebuilding the
  // candidates, their labels and the key's SHA-256 (hundreds of microseconds a call, more than a launch).
  std::map<std::string, std::string> spaces_;
};

} // namespace kiln
