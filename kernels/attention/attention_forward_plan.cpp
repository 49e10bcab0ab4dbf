#include "kernels/attention/attention_forward_plan.h"

#include "kernels/attention/attention_forward_prepare.h"
#include "kernels/attention/attention_launch.h"
#include "runtime/cuda_driver.h"

#include <mutex>

namespace kiln::attention {

using namespace detail;

void detail::check_forward_addresses(const ForwardAddresses& at, const ForwardExtents& bytes,
                                     const ApiSite& site) {
  // In validate_attention_args' order: the extents first, then each address, then the outputs' overlaps.
  const ByteRange ranges[] = {byte_range("q", at.q, bytes.q, site), byte_range("k", at.k, bytes.k, site),
                              byte_range("v", at.v, bytes.v, site), byte_range("o", at.o, bytes.o, site),
                              byte_range("lse", at.lse, bytes.lse, site)};
  for (const ByteRange& r : ranges)
    check_address(r.name, r.first, site);
  check_outputs_apart(ranges, 3, site);
}

struct ForwardPlan::State {
  AttentionOptions options; // the creation's: no mods, no block mask
  // The validated call and its launch arguments, whose five addresses each run replaces; the pick of the
  // creation (prepared.tuned) is not kept up to date: `launch` and `config` are.
  PreparedForward prepared;
  ForwardExtents bytes;
  ForwardLaunch launch;
  Config config;
  // The tuner's picks_version() read before the kept pick was selected, and the mode it was selected in.
  uint64_t picks_version = 0;
  rt::AutotuneMode mode = rt::AutotuneMode::On;
  std::mutex mutex; // runs take turns: they write `prepared.args` and may re-select
};

ForwardPlan::ForwardPlan(const TensorRef& q, const TensorRef& k, const TensorRef& v, const TensorRef& o,
                         const TensorRef& lse, const AttentionOptions& options, std::source_location where)
    : state_(std::make_unique<State>()) {
  const ApiSite site{"ForwardPlan", where};
  if (!options.mods.empty() || !options.mod_tensors.empty())
    reject(site,
           "options.mods or options.mod_tensors is set; a plan runs the plain forward, whose runs "
           "replace q, k, v, o and lse only: call forward() (C: kiln_attention_forward_cuda) for a call "
           "with mods");
  if (options.block_mask)
    reject(site,
           "options.block_mask is set; a plan runs the plain forward, without a block mask: call forward() "
           "(C: kiln_attention_forward_cuda) for a call with one");
  State& s = *state_;
  s.options = options;
  // Read before the selection: a pick it stores makes the plan's pick stale, and the first run selects again.
  s.picks_version = attention_tuner().picks_version();
  s.prepared = prepare_forward(q, k, v, o, lse, options, options.autotune, site);
  if (s.prepared.a.empty)
    return;
  // The mode the pick was made in, read only where a run compares it, as forward() reads KILN_AUTOTUNE only
  // where it selects (read again here: where it changed meanwhile, the first run selects again).
  if (!options.config)
    s.mode = options.autotune ? *options.autotune : rt::autotune_mode_from_env();
  s.bytes = ForwardExtents{extent_bytes("q", q, site), extent_bytes("k", k, site), extent_bytes("v", v, site),
                           s.prepared.o_bytes, extent_bytes("lse", lse, site)};
  s.launch = forward_launch(s.prepared, options);
  s.config = options.config ? *options.config : s.prepared.tuned->config;
}

ForwardPlan::~ForwardPlan() = default;

void ForwardPlan::run(const ForwardAddresses& at, void* stream, std::optional<rt::AutotuneMode> autotune,
                      std::source_location where) {
  State& s = *state_;
  if (s.prepared.a.empty)
    return;
  const ApiSite site{"ForwardPlan::run", where};
  check_forward_addresses(at, s.bytes, site);
  std::lock_guard lock(s.mutex);
  std::vector<LaunchArg>& args = s.prepared.args; // Q, K, V, O, LSE first (forward_launch_args)
  args[0].ptr = at.q, args[1].ptr = at.k, args[2].ptr = at.v, args[3].ptr = at.o, args[4].ptr = at.lse;
  rt::current_device(); // makes the context current on this thread
  if (!s.options.config) {
    const rt::AutotuneMode mode = autotune ? *autotune : rt::autotune_mode_from_env();
    const uint64_t version = attention_tuner().picks_version();
    if (version != s.picks_version || mode != s.mode || mode == rt::AutotuneMode::Force) {
      // As forward() would select now, timing (where the mode times) on this run's inputs.
      const TunedLaunch tuned = select_forward(s.prepared.a, s.options, args, s.prepared.o_bytes, mode);
      s.launch = ForwardLaunch{tuned.kernel, tuned.grid};
      s.config = tuned.config;
      s.picks_version = version;
      s.mode = mode;
    }
  }
  s.launch.kernel->launch(s.launch.grid, args, rt::Stream::wrap(stream));
}

const AttentionProblem& ForwardPlan::problem() const { return state_->prepared.a.problem; }

bool ForwardPlan::empty() const { return state_->prepared.a.empty; }

Config ForwardPlan::config() const {
  std::lock_guard lock(state_->mutex);
  return state_->config;
}

} // namespace kiln::attention
