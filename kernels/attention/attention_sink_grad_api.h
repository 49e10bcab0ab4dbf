// The backward API's part for the sink logits' gradient (BackwardOptions::dsink, attention_bwd_api.h): its
// checks, and its kernel's launch (fa2_bwd_sink.h) after the preprocess has written Delta.
#pragma once

#include "jit/launch_arg.h"
#include "kernels/attention/attention_api_checks.h"
#include "kernels/attention/attention_bwd_api.h"
#include "runtime/device.h"

#include <optional>
#include <vector>

namespace kiln::attention::detail {

// Where the sink's gradient goes: the caller's f32 tensor, per row ([B, H, N_Q]) or per head ([H]).
struct SinkGradTarget {
  uint64_t data = 0;
  bool per_head = false;
  uint64_t bytes = 0;
};

// options.dsink checked against the mods and the problem (BackwardOptions::dsink says what it must be), and
// against `ranges` (every other tensor of the call with elements) for overlaps; nullopt when not given. A
// kiln::Error naming `site` otherwise.
std::optional<SinkGradTarget> validate_sink_grad(const BackwardOptions& options, const AttentionProblem& p,
                                                 const std::vector<ByteRange>& ranges,
                                                 const std::vector<ValidatedModTensor>& mod_tensors,
                                                 const ApiSite& site);

// The sink's gradient kernel on `stream`: `args` are the backward's launch arguments (Delta written by the
// preprocess) followed by the mods' tensors; the target's pointer is appended.
void launch_sink_grad(const SinkGradTarget& target, const AttentionProblem& p, const AttentionMods& mods,
                      std::vector<LaunchArg> args, const rt::Stream& stream);

// An [H] target zeroed on `stream` (a call with no rows: B or N_Q of 0); nothing for a per-row one, which
// has no elements then.
void zero_sink_grad(const SinkGradTarget& target, const rt::Stream& stream);

} // namespace kiln::attention::detail
