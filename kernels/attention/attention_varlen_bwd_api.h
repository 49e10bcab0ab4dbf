// The attention backward over variable-length (packed) batches, as FlashAttention's varlen backward: dQ, dK,
// dV from the forward's inputs, its O and its LSE (forward_varlen() with an lse tensor, [H, total_q]) and dO.
//
//   forward_varlen(q, k, v, o, lse, batch, opts);                  // keep lse
//   BackwardOptions bopts;  static_cast<AttentionOptions&>(bopts) = opts;
//   backward_varlen(q, k, v, o, lse, dout, dq, dk, dv, batch, bopts); // dq, dout like q; dk, dv like k, v
//
// The kernels are the dense backward's built with VARLEN=1 (fa2_bwd_varlen.h): preprocess, dK/dV, then dQ, or
// dQ by f32 atomics in dK/dV and its convert: with options.config's ATOMIC_DQ=1, or with deterministic = false
// and no config where the tuner timed that pair the faster (backward()'s rule, attention_bwd_steps.h). A
// sequence's keys no query sees get dK = dV = 0 and its rows that see no key dQ = 0; a batch without query
// rows writes zeros to dk and dv, one without keys zeros to dq.
//
// The f32 scratch (Delta [H, total_q], and the atomic variant's accumulator [H, total_q, D]) is either the
// caller's (backward_varlen_with_workspace: enqueued without synchronizing, CUDA-graph-capturable with
// batch.check_offsets = false) or allocated by backward_varlen, which synchronizes options.stream before
// freeing it. Mods: options.mods and options.mod_tensors must be the
// forward's (forward_varlen(): per-sequence indices); a sink enters through lse, and its own gradient
// (options.dsink) is not built for packed batches yet (an error). Validation errors start
// "attention::backward_varlen:" and end in the caller's line.
#pragma once

#include "kernels/attention/attention_bwd_api.h"
#include "kernels/attention/attention_varlen_api.h"

namespace kiln::attention {

// What validate_varlen_bwd_args() derives: the forward's validation of q, k, v, o, lse and the packing, and
// the addresses and strides of dO, dQ, dK, dV.
struct ValidatedVarlenBackward {
  ValidatedVarlen fwd; // lse is required here
  PackedStrides dout, dq, dk, dv;
  uint64_t dout_data = 0, dq_data = 0, dk_data = 0, dv_data = 0;
};

// Every check validate_varlen_args() makes on q, k, v, o, lse and the batch (lse required), and: dout shaped
// and typed like q, dq like q, dk and dv like k and v (rank 3, a contiguous head dim, 16-byte aligned rows);
// gradients whose elements overlap each other, or that overlap an input (q, k, v, o, lse, dout, the offsets)
// or another gradient (byte ranges, or exactly for two views of one layout, as backward() decides it);
// options.config (the dK/dV kernel's) or options.dq_config that is not a config of fa2_bwd_dkdv_varlen /
// fa2_bwd_dq_varlen for the problem; ATOMIC_DQ=1 with deterministic, or with a dq_config. Needs no GPU.
ValidatedVarlenBackward
validate_varlen_bwd_args(const TensorRef& q, const TensorRef& k, const TensorRef& v, const TensorRef& o,
                         const TensorRef& lse, const TensorRef& dout, const TensorRef& dq,
                         const TensorRef& dk, const TensorRef& dv, const VarlenBatch& batch,
                         const BackwardOptions& options = {},
                         std::source_location where = std::source_location::current());

// The workspace backward_varlen_with_workspace() needs for q's problem ([total_q, H, D]) under `options`:
// Delta f32 [H, total_q], plus the dQ accumulator f32 [H, total_q, D] after it (at a 256-byte boundary) when
// the atomic pair may run: options.config has ATOMIC_DQ=1, or deterministic = false and neither config is
// given (as backward_workspace_bytes() decides it). 0 when q
// has no rows. A kiln::Error when q is not of rank 3 or has a negative dimension. Needs no GPU.
uint64_t varlen_backward_workspace_bytes(const TensorRef& q, const BackwardOptions& options = {},
                                         std::source_location where = std::source_location::current());

// The backward on caller-provided scratch (BackwardWorkspace, attention_bwd_api.h: device memory, 16-byte
// aligned, at least varlen_backward_workspace_bytes() long, apart from every tensor of the call): validates
// as backward_varlen does, picks the configs as it does, and enqueues the kernels on options.stream, then
// returns without synchronizing. With batch.check_offsets = false and the kernels compiled and their configs
// picked (options.autotune = Cached never times anything) it neither allocates, copies nor synchronizes, so
// it can be captured in a CUDA graph; with check_offsets (the default) it synchronizes the stream once to
// copy the offsets, as forward_varlen does. Besides validate_varlen_bwd_args()'s checks, a workspace that is
// too small, misaligned or overlapping a tensor is a kiln::Error. Throws kiln::Error when no GPU driver is
// available.
void backward_varlen_with_workspace(const TensorRef& q, const TensorRef& k, const TensorRef& v,
                                    const TensorRef& o, const TensorRef& lse, const TensorRef& dout,
                                    const TensorRef& dq, const TensorRef& dk, const TensorRef& dv,
                                    const VarlenBatch& batch, const BackwardWorkspace& workspace,
                                    const BackwardOptions& options = {},
                                    std::source_location where = std::source_location::current());

// The backward: validates, checks the offsets' contents as forward_varlen does (batch.check_offsets), picks
// each kernel's config (options.config / dq_config, else the tuner's per bucket of H, total_q, max_seqlen_q
// and max_seqlen_k, timing on scratch gradients), launches on options.stream and synchronizes it before
// returning (backward_varlen_with_workspace on a workspace it allocates). Throws kiln::Error when no GPU
// driver is available (after validating).
void backward_varlen(const TensorRef& q, const TensorRef& k, const TensorRef& v, const TensorRef& o,
                     const TensorRef& lse, const TensorRef& dout, const TensorRef& dq, const TensorRef& dk,
                     const TensorRef& dv, const VarlenBatch& batch, const BackwardOptions& options = {},
                     std::source_location where = std::source_location::current());

} // namespace kiln::attention
