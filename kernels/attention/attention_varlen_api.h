// The attention host API over variable-length (packed) batches, as FlashAttention's flash_attn_varlen_func:
// B sequences packed along one token dim, each its own attention problem with its own N_Q and N_K.
//
//   using namespace kiln::attention;
//   TensorRef q{q_ptr, DType::f16, {total_q, H, D}, {H * D, D, 1}};     // (total_q, H, D)
//   TensorRef k{k_ptr, DType::f16, {total_k, H_KV, D}, {H_KV * D, D, 1}}; // (total_k, H_KV, D), v alike
//   VarlenBatch batch;
//   batch.cu_seqlens_q = TensorRef::contiguous(cu_q_ptr, DType::i32, {B + 1});
//   batch.cu_seqlens_k = TensorRef::contiguous(cu_k_ptr, DType::i32, {B + 1});
//   batch.max_seqlen_q = ..., batch.max_seqlen_k = ...;
//   forward_varlen(q, k, v, o, lse, batch, opts);   // lse f32 [H, total_q], or std::nullopt
//
// Sequence b is rows cu_seqlens_q[b] .. cu_seqlens_q[b + 1] of q and o against keys cu_seqlens_k[b] ..
// cu_seqlens_k[b + 1] of k and v. Causal masks align per sequence (top-left: key j visible to query i iff
// j <= i; bottom-right: iff j <= i + N_K_b - N_Q_b; positions within the sequence); GQA as forward(). Lengths
// may be 0: a sequence with no keys gives its rows O = 0 and LSE = −inf, as any row that sees no key.
// LSE is [H, total_q], FlashAttention's varlen layout (a head's rows contiguous, as the kernel writes them).
//
// Score and mask mods and sinks (options.mods, options.mod_tensors) apply to each sequence as to one batch of
// forward(): b is the sequence's index, q_idx and kv_idx positions within the sequence (not packed rows), N_Q
// and N_K its lengths; a mod tensor is indexed per sequence and sized as the padded batch, its dims B, N_Q,
// N_K of extents B (sequences), max_seqlen_q and max_seqlen_k, or 1 (attention_varlen_mods.h).
//
// The backward is backward_varlen() (attention_varlen_bwd_api.h). What is not built: block masks,
// warp-specialised (TMA) configs, and FA1.
#pragma once

#include "kernels/attention/attention_api.h"
#include "kernels/attention/attention_varlen_problem.h"

namespace kiln::attention {

// The packing: offsets and the longest lengths, as FlashAttention takes them.
struct VarlenBatch {
  // i32 [B + 1] device arrays, contiguous: non-decreasing offsets from 0 to the tokens of q (cu_seqlens_q)
  // and of k and v (cu_seqlens_k).
  TensorRef cu_seqlens_q{0, DType::i32, {}, {}};
  TensorRef cu_seqlens_k{0, DType::i32, {}, {}};
  // The longest query and key sequence. The grid runs cdiv(max_seqlen_q, BLOCK_M) query tiles a sequence and
  // tuning buckets both; they may exceed the longest sequence (a model's limit), at the price of idle
  // programs.
  int64_t max_seqlen_q = 0, max_seqlen_k = 0;
  // The device holds the offsets, so the host can check them only by copying them. true (the default): before
  // the launch, options.stream is synchronized (offsets computed on it are read as it leaves them) and the 2
  // · (B + 1) offsets are copied to the host once and checked by check_varlen_offsets(): a kiln::Error for
  // offsets that do not start at 0, decrease, end elsewhere than total_q / total_k, or hold a sequence longer
  // than max_seqlen_q / max_seqlen_k. false: no copy and no synchronization (what a caller capturing a CUDA
  // graph or keeping the stream asynchronous wants); the offsets are then the caller's promise. The kernel
  // clamps them into [0, total_q] and [0, total_k], so that no offsets make it read or write outside q, k, v,
  // o and lse, but wrong offsets give wrong results, and the rows of a sequence longer than max_seqlen_q past
  // max_seqlen_q are left unwritten.
  bool check_offsets = true;
};

// What validate_varlen_args() derives from a valid call.
struct ValidatedVarlen {
  // The params a config must agree with: B sequences of the longest lengths (at least 1), H, H_KV, D, dtype,
  // causal, sm_scale, the K variant, tf32, exact_masked_v.
  AttentionProblem shape;
  VarlenSizes sizes;
  VarlenStrides strides; // token and head strides in elements, the caller's
  uint64_t q = 0, k = 0, v = 0, o = 0, cu_seqlens_q = 0, cu_seqlens_k = 0;
  std::optional<uint64_t> lse;                 // f32 [H, total_q] contiguous, when the caller asked for it
  std::vector<ValidatedModTensor> mod_tensors; // options.mod_tensors, in the kernel's order
  bool check_offsets = true;
  // B == 0 or total_q == 0: nothing to compute; forward_varlen() returns without touching the GPU.
  bool empty = false;
};

// Checks a varlen forward call without touching the GPU; a kiln::Error (ending in "(at file:line)", the
// caller's line) names the first mistake, what was expected and what came. Beyond forward()'s checks on
// dtypes, head dim, heads, strides, alignment, sizes, overlapping outputs, sm_scale and options.config (which
// must be an fa2_fwd_varlen config, e.g. default_fa2_varlen_config's), it rejects:
//  - q, k, v, o not of rank 3 ([total, heads, D]), lse not of rank 2 ([H, total_q]) or not f32 contiguous;
//  - cu_seqlens_q / cu_seqlens_k not i32, not of rank 1, of different lengths, empty (B + 1 >= 1), not
//    contiguous, or at a null or misaligned (4-byte) address; o or lse overlapping them;
//  - max_seqlen_q / max_seqlen_k negative or of 2^31 - 2^16 or more, or max_seqlen_q = 0 with q holding rows;
//  - options.layout other than the default (packed tensors have one layout), options.block_mask;
//  - options.mods and options.mod_tensors as forward() checks them, with the mod tensors' N_Q and N_K dims of
//    extent max_seqlen_q and max_seqlen_k (or 1) and B the sequences.
// k and v may hold no tokens (every sequence without keys): their addresses are then not read or checked.
ValidatedVarlen validate_varlen_args(const TensorRef& q, const TensorRef& k, const TensorRef& v,
                                     const TensorRef& o, const std::optional<TensorRef>& lse,
                                     const VarlenBatch& batch, const AttentionOptions& options = {},
                                     std::source_location where = std::source_location::current());

// The offsets' contents checked on the host (forward_varlen runs it on the copies it makes when
// batch.check_offsets): B + 1 each, starting at 0, non-decreasing, ending at total_q / total_k, no sequence
// longer than max_seqlen_q / max_seqlen_k. A kiln::Error names the first offset that breaks a rule.
void check_varlen_offsets(const ValidatedVarlen& v, const std::vector<int32_t>& cu_seqlens_q,
                          const std::vector<int32_t>& cu_seqlens_k,
                          std::source_location where = std::source_location::current());

namespace detail {
struct ApiSite; // attention_api_checks.h
// validate_varlen_args() with errors that name `site`'s entry point (backward_varlen's checks start with it).
ValidatedVarlen validate_varlen_args(const TensorRef& q, const TensorRef& k, const TensorRef& v,
                                     const TensorRef& o, const std::optional<TensorRef>& lse,
                                     const VarlenBatch& batch, const AttentionOptions& options,
                                     const ApiSite& site);
// check_varlen_offsets() with errors that name `site`'s entry point (the C ABI's host backward checks the
// offsets it reads as backward_varlen's).
void check_varlen_offsets(const ValidatedVarlen& v, const std::vector<int32_t>& cu_seqlens_q,
                          const std::vector<int32_t>& cu_seqlens_k, const ApiSite& site);
// The offsets' contents as forward_varlen and backward_varlen check them when v.check_offsets: `stream`
// synchronized, both arrays copied to the host once and given to check_varlen_offsets (errors naming
// `entry`). Returns the copies (empty when not checked). Needs a driver and the current device's context.
struct OffsetsOnHost {
  std::vector<int32_t> cu_seqlens_q, cu_seqlens_k;
};
OffsetsOnHost read_checked_offsets(const ValidatedVarlen& v, void* stream, const char* entry,
                                   std::source_location where);
// The forward's FLOPs by the convention, for the tuner's tables: exact from `host`'s offsets when they were read,
// else a bound (every row against the longest key sequence).
double varlen_flops(const ValidatedVarlen& v, const OffsetsOnHost& host);
} // namespace detail

// fa2_fwd_varlen's launch arguments (fa2_fwd_varlen.h) for a validated call writing LSE to `lse`.
std::vector<LaunchArg> varlen_launch_args(const ValidatedVarlen& v, uint64_t lse);

// FlashAttention-2 forward over the packed batch: each sequence's o = softmax(q kᵀ · sm_scale) v, and its
// LSE. Validates everything first (validate_varlen_args), checks the offsets' contents when
// batch.check_offsets (see VarlenBatch: a synchronization and a copy of 2 · (B + 1) integers), then picks the
// config as forward() does (options.config, else the autotuner as options.autotune or KILN_AUTOTUNE say,
// tuned per bucket of H, total_q, max_seqlen_q and max_seqlen_k, timing on scratch outputs) and launches on
// options.stream, asynchronously unless lse is omitted (a temporary LSE is allocated, and the stream
// synchronized before it is freed). Throws kiln::Error when no GPU driver is available (after validating).
void forward_varlen(const TensorRef& q, const TensorRef& k, const TensorRef& v, const TensorRef& o,
                    const std::optional<TensorRef>& lse, const VarlenBatch& batch,
                    const AttentionOptions& options = {},
                    std::source_location where = std::source_location::current());

} // namespace kiln::attention
