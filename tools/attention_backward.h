// `kiln attention --backward`: the attention backward on the command line's inputs and dO, in the
// interpreter (run_bwd after an interpreted forward gives O and LSE) or on the GPU through the host API
// (kiln::attention::forward, then backward), and its timing on the GPU.
#pragma once

#include "kernels/attention/attention_bwd_problem.h"
#include "tools/attention_runs.h"

#include <optional>
#include <utility>

namespace kiln::cli {

struct BackwardRequest {
  AttentionProblem problem;
  AttentionInputs inputs;
  HostBuffer dout;                  // the problem's dtype and layout, like Q
  std::optional<Config> fwd_config; // the forward's config (--set); none: the API's choice
  bool deterministic = true; // false: the atomic-dQ variant in the interpreter, the API's choice on the GPU
  AttentionMods mods;        // --mod: timed through the API with options.mods (run_bwd_with_mods runs them)
  ModTensorValues mod_tensors;
  // --block-mask: (BLOCK_M, BLOCK_N) of the block mask the API's forward and backward run over (made by
  // make_block_mask from the mods); none: no block mask.
  std::optional<std::pair<int64_t, int64_t>> block_mask_tiles;
};

// dQ, dK, dV in logical order.
AttentionGrads run_attention_backward(const BackwardRequest& r, Executor executor);

// On the GPU, through the host API (with the request's mods, whose tensors are uploaded once): backward()
// alone and the training step forward() + backward(), each the median of `reps` calls after a warm-up call
// (which may tune).
struct BackwardTiming {
  GpuTiming backward, step;
};
BackwardTiming time_attention_backward(const BackwardRequest& r, int reps);

} // namespace kiln::cli
