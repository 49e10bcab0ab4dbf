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

bool atomic_pair_is_faster(const BwdVariantTimes& deterministic, const BwdVariantTimes& atomic) {
  auto total = [](const BwdVariantTimes& t) -> std::optional<double> {
    if (!t.pre || !t.dkdv || !t.last)
      return std::nullopt;
    return *t.pre + *t.dkdv + *t.last;
  };
  const std::optional<double> d = total(deterministic), a = total(atomic);
  return d && a && *a < *d;
}

} // namespace kiln::attention::detail
