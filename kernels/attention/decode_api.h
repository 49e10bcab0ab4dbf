// The split-KV decoding host API (FlashDecoding; flash_attn_with_kvcache's forward without the cache update):
// few queries per sequence against a KV cache the caller owns, contiguous or paged, over device TensorRefs
// (attention_api.h).
//
//   using namespace kiln::attention;
//   TensorRef q{q_ptr, DType::f16, {B, N_Q, H, D}, {N_Q * H * D, H * D, D, 1}};            // [B, N_Q, H, D]
//   TensorRef k = TensorRef::contiguous(k_pages, DType::f16, {num_pages, page_size, H_KV, D}); // and v
//   DecodeOptions opts;
//   opts.block_table = TensorRef::contiguous(table, DType::i32, {B, max_pages});
//   opts.seqlens_k = TensorRef::contiguous(lens, DType::i32, {B});
//   opts.causal = Causal::BottomRight;
//   decode(q, k, v, o, lse, opts);                                                          // lse may be
//   nullopt
//
// Two kernels run on options.stream: decode_split (keys cut into num_splits ranges, one program per split and
// kv head, the kv head's G query heads × N_Q queries packed as one tile's rows) and decode_combine (the
// splits merged by LSE). Every mistake a caller can make in the description is a kiln::Error naming what was
// expected and what came, before any GPU work (validate_decode_args, tested in CI).
#pragma once

#include "kernels/attention/attention_api.h"
#include "kernels/attention/decode_problem.h"

namespace kiln::attention {

struct DecodeOptions {
  // i32 [B], contiguous: the keys of sequence b are its first seqlens_k[b] cache rows (the cache fill; rows
  // past it are never read). Each value must lie in [0, the cache's capacity]; the values are on the device
  // and are not checked. nullopt: every sequence has the cache's capacity in keys.
  std::optional<TensorRef> seqlens_k;
  // i32 [B, max_pages], the last dim contiguous: key j of sequence b is row j % page_size of page
  // block_table[b, j / page_size], in any order. Given, k_cache and v_cache are pages [num_pages, page_size,
  // H_KV, D] with page_size a power of two >= 16, and the capacity is max_pages · page_size; the entries a
  // sequence's keys reach must lie in [0, num_pages) (device values, not checked), the others are never read.
  // nullopt: k_cache and v_cache are [B, N_K, H_KV, D].
  std::optional<TensorRef> block_table;
  // None, or BottomRight (query i of N_Q sees keys j <= n_k − N_Q + i, as decoding needs). TopLeft is
  // refused.
  Causal causal = Causal::None;
  double sm_scale = 0; // 0 means 1 / sqrt(D); finite and representable in f32
  // How many ranges each sequence's keys are cut into; 0 chooses (choose_num_splits over the device's SMs).
  int64_t num_splits = 0;
  // f32, rank 1, contiguous, at least decode_workspace_bytes() / 4 elements: the splits' partial outputs.
  // Given, decode() is asynchronous on the stream and allocates nothing (as CUDA graph capture needs);
  // nullopt, decode() allocates it and synchronizes the stream before freeing it.
  std::optional<TensorRef> workspace;
  // The split kernel's config instead of the autotuned/default one (default_decode_split_config of the
  // problem with its tiles changed; BLOCK_N no wider than a page).
  std::optional<Config> split_config;
  std::optional<rt::AutotuneMode> autotune; // nullopt follows KILN_AUTOTUNE (attention_api.h)
  void* stream = nullptr;                   // CUstream / cudaStream_t, not owned; nullptr the legacy stream
};

// What validate_decode_args() derives from a valid call.
struct ValidatedDecode {
  DecodeProblem problem; // N_K: the capacity; seqlens_on_device when options.seqlens_k is given
  int64_t stride_qb = 0, stride_qn = 0, stride_qh = 0;
  int64_t stride_kb = 0, stride_kn = 0, stride_kh = 0; // stride_kb: the batch's or, paged, the page's
  int64_t stride_vb = 0, stride_vn = 0, stride_vh = 0;
  int64_t stride_ob = 0, stride_on = 0, stride_oh = 0;
  int64_t stride_bt = 0;
  uint64_t q = 0, k = 0, v = 0, o = 0, block_table = 0, seqlens_k = 0;
  std::optional<uint64_t> lse, workspace;
  bool empty = false; // B == 0: nothing to do
};

// Checks a decode() call without touching the GPU; a kiln::Error ending in the caller's line names the first
// mistake. It rejects:
//  - q and o not [B, N_Q, H, D], k_cache and v_cache not [B, N_K, H_KV, D] (or, with a block table,
//  [num_pages,
//    page_size, H_KV, D]) and of one shape; lse not f32 [B, H, N_Q] contiguous;
//  - a dtype other than f16/bf16/f32, or q, k_cache, v_cache and o of different dtypes; a block table or
//  seqlens_k
//    that is not i32, of the wrong rank or batch, or not contiguous along its last dim;
//  - a head dim of 0, above 256 or not a multiple of 8; H or H_KV of 0, or H not a multiple of H_KV; N_Q of
//  0;
//    a cache with no key; a page size that is not a power of two >= 16; a block table with no column;
//  - negative strides, a head dim that is not contiguous, null or misaligned addresses (16 bytes for the
//    tensors the kernels move as vectors, 4 for the i32 ones), strides not a multiple of 16 bytes;
//  - sizes past the kernels' i32 indices, B · H_KV or the row tiles above 65535 (the grid's y and z dims);
//  - o, lse or the workspace overlapping an input or each other, o elements that overlap each other;
//  - causal TopLeft; a sm_scale that is NaN, infinite or too large for f32; num_splits negative or above
//  1024;
//  - a workspace that is not f32, rank 1 and contiguous, too small, or misaligned;
//  - options.split_config that disagrees with the problem or has BLOCK_N wider than a page.
ValidatedDecode validate_decode_args(const TensorRef& q, const TensorRef& k_cache, const TensorRef& v_cache,
                                     const TensorRef& o, const std::optional<TensorRef>& lse,
                                     const DecodeOptions& options = {},
                                     std::source_location where = std::source_location::current());

// Bytes of f32 workspace decode() needs for these shapes and this many splits.
uint64_t decode_workspace_bytes(int64_t B, int64_t H, int64_t N_Q, int64_t D, int64_t num_splits);
// The programs of the split kernel at `split_config` the current device runs at once: its SMs × the kernel's
// resident CTAs an SM (compiles the kernel, through the compile cache).
int64_t decode_slots(const Config& split_config);
// The split count decode() uses for a validated call on the current device: options.num_splits, or the
// heuristic's (choose_num_splits over decode_slots) for the split kernel's `split_config`.
int64_t decode_num_splits(const ValidatedDecode& a, const Config& split_config, int64_t requested);

// o = softmax(q k_cacheᵀ · sm_scale) v_cache per sequence over its keys (GQA/MQA: query head h reads kv head
// h / (H / H_KV)), lse (when given) the natural-log logsumexp; a query that sees no key gets O = 0 and
// LSE = −inf (docs/guarantees.md). Validates everything first, then launches the split and combine kernels on
// options.stream: asynchronous when options.workspace is given, else (a workspace to free) synchronizing.
// Throws kiln::Error when no GPU driver is available (after validating).
void decode(const TensorRef& q, const TensorRef& k_cache, const TensorRef& v_cache, const TensorRef& o,
            const std::optional<TensorRef>& lse = std::nullopt, const DecodeOptions& options = {},
            std::source_location where = std::source_location::current());

} // namespace kiln::attention
