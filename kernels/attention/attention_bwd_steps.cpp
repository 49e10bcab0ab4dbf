#include "kernels/attention/attention_bwd_steps.h"

#include "kernels/attention/attention_launch.h"

namespace kiln::attention::detail {

BwdStep fixed_step(const KernelDef& def, const Config& config, const SizeArgs& sizes) {
  return BwdStep{config, compiled_for(def, config), def.grid(config, sizes), std::nullopt};
}

BwdStep tuned_step(const KernelDef& def, const Config& base, const SizeArgs& sizes,
                   const std::vector<LaunchArg>& args, const std::vector<OutputArg>& outputs, double flops,
                   rt::AutotuneMode mode) {
  TuneOptions tune;
  tune.mode = mode;
  tune.flops = flops;
  TunedLaunch t = attention_tuner().select(def, base, sizes, args, outputs, tune);
  std::optional<double> ms;
  if (t.result->best)
    ms = t.result->best_ms;
  return BwdStep{std::move(t.config), std::move(t.kernel), t.grid, ms};
}

bool atomic_pair_given(const BackwardOptions& options) {
  return options.config && options.config->get_or("ATOMIC_DQ", 0) != 0;
}

bool may_accumulate_dq(const BackwardOptions& options) {
  if (options.block_mask) // always the deterministic pair (ATOMIC_DQ=1 is refused)
    return false;
  if (options.config)
    return atomic_pair_given(options);
  return !options.deterministic && !options.dq_config;
}

bool chooses_variant(const BackwardOptions& options) {
  return !options.deterministic && !options.config && !options.dq_config && !options.block_mask;
}

bool atomic_pair_is_faster(std::optional<double> dkdv_ms, std::optional<double> dq_ms,
                           std::optional<double> atomic_dkdv_ms, std::optional<double> convert_ms) {
  if (!dkdv_ms || !dq_ms || !atomic_dkdv_ms || !convert_ms)
    return false;
  return *atomic_dkdv_ms + *convert_ms < *dkdv_ms + *dq_ms;
}

} // namespace kiln::attention::detail
