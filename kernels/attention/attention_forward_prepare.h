// What forward(), tune_forward() and ForwardPlan share: a forward call validated and prepared for its launch
// (the launch arguments, a temporary LSE where the caller gave none, the config), the tuner's choice for a
// validated call alone (what a plan asks again when the tuner's picks moved), and the kernel a prepared call
// launches; and the rechecks of a plan's run on new addresses. Internal to kernels/attention.
#pragma once

#include "jit/tuned_kernel.h"
#include "kernels/attention/attention_api_checks.h"
#include "kernels/attention/attention_forward_plan.h"
#include "runtime/device.h"

#include <memory>
#include <optional>
#include <vector>

namespace kiln::attention::detail {

struct PreparedForward {
  ValidatedAttention a;
  std::optional<rt::DeviceBuffer> lse_scratch; // when the caller gave no lse
  std::vector<LaunchArg> args;                 // forward_launch_args (empty for an empty problem)
  uint64_t o_bytes = 0;                        // o's extent: the tuner's scratch copy of it
  std::optional<TunedLaunch> tuned;            // empty when options.config was given
};

// Validation, the GPU check, the launch arguments and, unless options.config is set, the tuner's choice in
// `mode`; for an empty problem (B = 0 or N_Q = 0) only the validation, and no GPU is needed.
PreparedForward prepare_forward(const TensorRef& q, const TensorRef& k, const TensorRef& v,
                                const TensorRef& o, const std::optional<TensorRef>& lse,
                                const AttentionOptions& options, std::optional<rt::AutotuneMode> mode,
                                const ApiSite& site);

// The tuner's choice for a validated, non-empty forward whose launch arguments are `args` (the timing
// launches read its inputs there and write scratch copies of O, `o_bytes` of it, and of LSE), tuned as `mode`
// says (nullopt: KILN_AUTOTUNE). Over options.block_mask: the configs at its tiles.
TunedLaunch select_forward(const ValidatedAttention& a, const AttentionOptions& options,
                           const std::vector<LaunchArg>& args, uint64_t o_bytes,
                           std::optional<rt::AutotuneMode> mode);

// The kernel a prepared, non-empty forward launches, and its grid: the tuner's pick, or options.config's
// kernel (over the block mask's lists when there is one, else the mods' or the built-in one).
struct ForwardLaunch {
  std::shared_ptr<JitKernel> kernel;
  Grid grid;
};
ForwardLaunch forward_launch(const PreparedForward& f, const AttentionOptions& options);

// Each tensor's extent in bytes from its address, as validation measured it, in q, k, v, o, lse order.
struct ForwardExtents {
  uint64_t q = 0, k = 0, v = 0, o = 0, lse = 0;
};

// What ForwardPlan::run checks of new addresses, as validate_attention_args checks them: each non-null and
// 16-byte aligned, each tensor's bytes within the address space, o and lse apart from q, k, v and each other;
// a kiln::Error naming the first tensor at fault otherwise. Needs no GPU.
void check_forward_addresses(const ForwardAddresses& at, const ForwardExtents& bytes, const ApiSite& site);

} // namespace kiln::attention::detail
