// Split-KV decoding, first kernel (FlashDecoding): few queries per sequence (N_Q of 1 to 16) against a long
// KV cache. Program (split, b·H_KV + kv head, row tile) packs the G = H / H_KV query heads that share one kv
// head, times the sequence's N_Q queries, into the rows of one tile (packed row r is query head
// kv_head·G + r / N_Q, query r % N_Q), so that each K/V tile is read once per kv head, not once per query
// head; walks its split's share of the sequence's keys in BLOCK_N tiles with FA2's online softmax; and
// writes, per packed row, its split's softmax output O_s (f32, normalised by the split's own row sum) and
// LSE_s (log2 domain: m + log2 l; −inf with O_s = 0 where the split saw no key). decode_combine merges the
// splits.
//
// Args, in order: Q, K, V (DTYPE pointers), BLOCK_TABLE (i32 [B, max_pages], PAGED=1 only), SEQLENS_K (i32
// [B], SEQLENS_K=1 only), O_PART (f32 [NUM_SPLITS, B·H·N_Q, D]), LSE_PART (f32 [NUM_SPLITS, B·H·N_Q]),
// sm_scale (f32), B, H, H_KV, N_Q, N_K, D, PAGE_SIZE, NUM_SPLITS (i32), then i64 strides in elements:
// stride_qb, stride_qn, stride_qh (Q is [B, N_Q, H, D]); stride_kb, stride_kn, stride_kh and the same for V
// (the cache is [B, N_K, H_KV, D], or paged [num_pages, PAGE_SIZE, H_KV, D] with stride_kb the page stride);
// stride_bt (BLOCK_TABLE's row stride). The head dim is contiguous everywhere. Rows of the workspaces are in
// (b, h, i) order, LSE's order, so that the combine kernel needs no index of the packing.
//
// Keys: sequence b has N_K keys, or SEQLENS_K[b] (≤ the cache's capacity) with SEQLENS_K=1. CAUSAL=2 is
// bottom-right (query i sees keys j ≤ n_k − N_Q + i, as decoding needs); 0 none; top-left is refused. Paged:
// key j of sequence b is row j % PAGE_SIZE of page BLOCK_TABLE[b, j / PAGE_SIZE]; a BLOCK_N tile lies inside
// one page (the host keeps BLOCK_N ≤ PAGE_SIZE, both powers of two), so it is one block-pointer tile of one
// page.
//
// Params: the attention params (attention_tiles.h: BLOCK_M packed rows, BLOCK_N, HEAD_DIM, EVEN_D, CAUSAL,
// K_TRANSPOSED, DTYPE, TF32; EXACT_MASKED_V is refused), PAGED, SEQLENS_K.
// Grid: (NUM_SPLITS, B·H_KV, cdiv(G·N_Q, BLOCK_M)).
#pragma once

#include "dsl/registry.h"

namespace kiln {

Kernel build_decode_split(const Config& config);
const KernelDef& decode_split_def(); // built once per process

// The keys each split of a sequence with n_k keys covers: cdiv(cdiv(n_k, block_n), num_splits) tiles of
// block_n (the last splits may cover less, or nothing). What the kernel computes, for the host and the tests.
int64_t decode_split_keys(int64_t n_k, int64_t block_n, int64_t num_splits);

} // namespace kiln
