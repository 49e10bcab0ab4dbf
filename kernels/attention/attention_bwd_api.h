// The attention backward host API: dQ, dK, dV of FlashAttention-2 over device tensors the caller owns, from
// the forward's inputs, its output O and its LSE (forward() with an lse tensor), and the output gradient dO.
//
//   using namespace kiln::attention;
//   forward(q, k, v, o, lse, opts);                        // keep lse: the backward recomputes P from it
//   BackwardOptions bopts;  static_cast<AttentionOptions&>(bopts) = opts;
//   backward(q, k, v, o, lse, dout, dq, dk, dv, bopts);   // dq like q, dk and dv like k and v; blocks
//   // CUDA-graph capturable: the f32 scratch in the caller's memory, no allocation, no synchronize
//   BackwardWorkspace ws{my_buffer, backward_workspace_bytes(q, bopts)};
//   backward_with_workspace(q, k, v, o, lse, dout, dq, dk, dv, ws, bopts);
//
// Three kernels run (kernels/attention/fa2_bwd_*.h): the preprocess (Delta = rowsum(dO ∘ O)), dK/dV (one
// program per key tile, GQA groups summed in the program) and dQ (one program per query tile); a fourth, the
// sink's gradient (fa2_bwd_sink.h), after the preprocess when options.dsink asks for it. All are
// deterministic; with deterministic = false the autotuner may instead pick dQ accumulated by f32 atomics
// inside the dK/dV kernel, then cast (ATOMIC_DQ=1), when that is faster.
//
// With mods (options.mods, options.mod_tensors: the forward's), dK/dV and dQ recompute the scores with them and
// multiply dS by the score mods' derivative (attention_mods.h); they are tuned apart from the built-in kernels.
// With options.block_mask (the forward's: attention_block_mask_api.h), dK/dV walks each key tile's lists of
// query tiles and dQ each query tile's lists of key tiles (fa2_bwd_block_mask.h), at the block mask's tiles
// (options.config's and dq_config's must be them), not tuned, always the deterministic pair.
//
// Validation errors start "attention::backward:" and end in the caller's line, like the forward's.
#pragma once

#include "kernels/attention/attention_api.h"

namespace kiln::attention {

struct BackwardOptions : AttentionOptions {
  // true (the default): bitwise-reproducible gradients (no atomics); a config with ATOMIC_DQ=1 is an error.
  // false, with neither config given: both variants are tuned (dK/dV + dQ, and dK/dV with ATOMIC_DQ=1 + the
  // dQ convert) and the pair with the smaller sum of the tuner's times runs; when the tuner has no times
  // (KILN_AUTOTUNE=off, or cached with nothing remembered) the deterministic pair runs.
  bool deterministic = true;
  // options.config (inherited) is the dK/dV kernel's config, and its ATOMIC_DQ picks the variant; dq_config
  // is the dQ kernel's (an error with ATOMIC_DQ=1, which runs no dQ kernel). Either may be given alone (the
  // other is tuned); each must agree with the problem (start from default_bwd_configs()). Giving dq_config
  // alone keeps the deterministic variant.
  std::optional<Config> dq_config;
  // With a sink (options.mods.sink): where to write d loss / d sink (fa2_bwd_sink.h), f32, dense row-major,
  // overlapping no other tensor of the call. Either [B, H, N_Q], each row's d loss / d sink(b, h, q_idx), for
  // any sink (a user's sink that depends on b or the row reduces it to its own parameters), or [H], for a
  // per-head sink (SinkMod::per_head: attention_sinks()' "sinks" tensor), the gradient of that tensor: the
  // rows' summed over batch and rows in a fixed order (deterministic). Not given: no sink gradient is computed.
  // Rows that see no key get 0 (their O is 0 whatever the sink), as does a −inf sink.
  std::optional<TensorRef> dsink;
};

// What validate_attention_bwd_args() derives: the forward's validation of q, k, v, o, lse plus the addresses
// and strides of dO, dQ, dK, dV.
struct ValidatedBackward {
  ValidatedAttention fwd; // problem, strides of q, k, v, o; lse is required here
  TensorStrides dout, dq, dk, dv;
  uint64_t dout_data = 0, dq_data = 0, dk_data = 0, dv_data = 0;
};

// Every check forward() makes on q, k, v, o, lse (lse is required), and: dout shaped, typed and aligned like
// q; dq like q, dk and dv like k and v (any strides with a contiguous head dim, 16-byte aligned rows);
// gradients whose elements overlap each other; any gradient overlapping an input (q, k, v, o, lse, dout) or
// another gradient (byte ranges, or exactly, element by element, for two views of one layout: dK and dV
// interleaved in one fused-KV gradient buffer are accepted); B * H above CUDA's grid limit (65535); options.config / dq_config that disagree with the
// problem, name params their kernel lacks or lack a tile; ATOMIC_DQ=1 with deterministic, or with a
// dq_config; a score mod the builder cannot differentiate (without its own derivative); a mod tensor
// overlapping a gradient; options.dsink without a sink, of a dtype, shape or strides other than the above, [H]
// for a sink that is not per head, or overlapping another tensor. With N_Q == 0 only dk and dv (the tensors with elements) get the address and stride checks.
// A kiln::Error starting "attention::backward:" and ending in "(at file:line)" names the first mistake, what
// was expected and what came. Needs no GPU.
ValidatedBackward validate_attention_bwd_args(const TensorRef& q, const TensorRef& k, const TensorRef& v,
                                              const TensorRef& o, const TensorRef& lse, const TensorRef& dout,
                                              const TensorRef& dq, const TensorRef& dk, const TensorRef& dv,
                                              const BackwardOptions& options = {},
                                              std::source_location where = std::source_location::current());

// The f32 scratch of the backward in memory the caller owns: Delta [B, H, N_Q] and, when the atomic-dQ variant
// may run, the dQ accumulator [B, H, N_Q, D] after it (at a 256-byte boundary). Device memory on kiln's device,
// 16-byte aligned, at least backward_workspace_bytes() long; it must not overlap any tensor of the call, and
// must not be used by anything else until the backward's kernels on options.stream are done with it.
struct BackwardWorkspace {
  uint64_t data = 0;
  uint64_t bytes = 0;
};

// The workspace backward_with_workspace() needs for q's problem (its B, H, N_Q, D as options.layout reads
// them) under `options`: Delta, plus the accumulator when the atomic variant may run (deterministic = false
// with no config given, or options.config with ATOMIC_DQ=1). 0 when B or N_Q is 0. A kiln::Error when q is
// not of rank 4 or has a negative dimension, or the layout is unknown. Needs no GPU.
uint64_t backward_workspace_bytes(const TensorRef& q, const BackwardOptions& options = {},
                                  std::source_location where = std::source_location::current());

// The backward on caller-provided scratch, CUDA-graph-capturable: validates, picks the configs
// (options.config / dq_config, else the tuner's as options.autotune / KILN_AUTOTUNE says, each kernel with its
// own space, tuning key and cache entries) and enqueues its kernels on options.stream, then returns without
// synchronizing. Once the kernels are compiled and the configs picked (a call with autotune = Cached never
// times anything), a call neither allocates device memory nor synchronizes, so it can be captured. B == 0:
// nothing to do (no driver needed). N_Q == 0: dk and dv are zeroed (no query sees a key) on options.stream,
// nothing else runs (an [H] options.dsink is zeroed too, also when B == 0). Tuning tables count the convention's backward FLOPs (2.5 × the forward's) as dK/dV 2.0 ×
// (2.5 × with ATOMIC_DQ=1) and dQ 0.5 ×. Besides validate_attention_bwd_args()'s checks, a workspace smaller
// than backward_workspace_bytes(), not 16-byte aligned, or overlapping a tensor is a kiln::Error. Throws
// kiln::Error when no GPU driver is available.
void backward_with_workspace(const TensorRef& q, const TensorRef& k, const TensorRef& v, const TensorRef& o,
                             const TensorRef& lse, const TensorRef& dout, const TensorRef& dq, const TensorRef& dk,
                             const TensorRef& dv, const BackwardWorkspace& workspace,
                             const BackwardOptions& options = {},
                             std::source_location where = std::source_location::current());

// backward_with_workspace() on a workspace it allocates, then synchronizes options.stream before freeing it,
// so the call returns when the gradients are written (not capturable).
void backward(const TensorRef& q, const TensorRef& k, const TensorRef& v, const TensorRef& o,
              const TensorRef& lse, const TensorRef& dout, const TensorRef& dq, const TensorRef& dk,
              const TensorRef& dv, const BackwardOptions& options = {},
              std::source_location where = std::source_location::current());

} // namespace kiln::attention
