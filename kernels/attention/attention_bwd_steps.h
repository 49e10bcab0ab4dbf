// What backward() (attention_bwd_api.cpp) and backward_varlen() (attention_varlen_bwd_api.cpp) share when they
// pick their kernels: one kernel of the backward ready to launch, with the tuner's time for it, and the rule that
// picks between the deterministic pair (dK/dV, then dQ) and the atomic one (dK/dV adding dQ by f32 atomics, then
// its convert). Internal to kernels/attention.
#pragma once

#include "jit/tuned_kernel.h"
#include "kernels/attention/attention_bwd_api.h"

#include <memory>
#include <optional>
#include <vector>

namespace kiln::attention::detail {

// FLOPs per kernel for the tuning tables, splitting the convention's backward (2.5 × the forward: the five
// products S, dV, dP, dK, dQ) by where each product is useful: dK/dV computes S, dV, dP, dK (2.0 ×) and, with
// ATOMIC_DQ=1, dQ too (2.5 ×); the dQ kernel adds dQ (0.5 ×; its S and dP are recomputation).
inline constexpr double kDkdvFlops = 2.0, kAtomicDkdvFlops = 2.5, kDqFlops = 0.5;

// One kernel of the backward, ready to launch, with the tuner's time for it when there is one.
struct BwdStep {
  Config config;
  std::shared_ptr<JitKernel> kernel;
  Grid grid;
  std::optional<double> ms;
};

// `def` at `config`, compiled, not timed.
BwdStep fixed_step(const KernelDef& def, const Config& config, const SizeArgs& sizes);

// `def` at the attention tuner's pick from `base` in `mode` (tuning launches on `args`, writing scratch copies of
// `outputs`), with its time when the tuner has one.
BwdStep tuned_step(const KernelDef& def, const Config& base, const SizeArgs& sizes,
                   const std::vector<LaunchArg>& args, const std::vector<OutputArg>& outputs, double flops,
                   rt::AutotuneMode mode);

// Whether options.config asks for the atomic-dQ pair (ATOMIC_DQ=1).
bool atomic_pair_given(const BackwardOptions& options);

// Whether the atomic-dQ pair may run, and so whether the workspace holds the dQ accumulator: options.config's
// ATOMIC_DQ when it is given, else deterministic = false without a dq_config; never over a block mask.
bool may_accumulate_dq(const BackwardOptions& options);

// Whether the call leaves the variant to the tuner's times: deterministic = false and neither config given.
bool chooses_variant(const BackwardOptions& options);

// The tuner's times (ms) of one way through the backward: its preprocess (Delta; for the atomic pair also the
// zeroed f32 dQ accumulator, 4 · D bytes a query row more), dK/dV, and the dQ kernel or the dQ convert.
struct BwdVariantTimes {
  std::optional<double> pre, dkdv, last;
};

// Whether the atomic pair replaces the deterministic one: only when all six kernels were timed and the atomic
// way's sum is the smaller; without times (KILN_AUTOTUNE=off, or cached with nothing remembered) the
// deterministic pair stays. A caller passes 0 for a kernel with nothing to do (an empty grid).
bool atomic_pair_is_faster(const BwdVariantTimes& deterministic, const BwdVariantTimes& atomic);

} // namespace kiln::attention::detail
