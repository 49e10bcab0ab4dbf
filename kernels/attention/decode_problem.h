// Host-side split-KV decoding problems (decode_split.h, decode_combine.h): shapes, the KV cache (contiguous
// or paged with a block table), per-sequence key counts, random inputs, the double-precision reference, the
// configs of the two kernels, the num_splits heuristic, and runs of the kernel pair in the interpreter or on
// the GPU on host buffers. Tests, the host API and the GPU checks describe decoding through DecodeProblem.
#pragma once

#include "kernels/attention/attention_problem.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

struct DecodeProblem {
  int64_t B = 1, H = 1, H_KV = 1, N_Q = 1, D = 64;
  // The cache's capacity in keys per sequence: the contiguous cache's N dim, or max_pages · page_size.
  int64_t N_K = 1;
  DType dtype = DType::f16;
  int causal = 0;        // 0 none, 2 bottom-right (the CAUSAL param)
  int64_t page_size = 0; // 0: contiguous cache [B, N_K, H_KV, D]; else pages [num_pages, page_size, H_KV, D]
  std::vector<int64_t> seqlens_k; // keys of each sequence (<= N_K); empty: every sequence has N_K
  // The host API's case: per-sequence key counts that only a device tensor holds (seqlens_k stays empty).
  bool seqlens_on_device = false;
  double sm_scale = 0; // 0 → 1 / sqrt(D)

  int64_t group() const { return H / H_KV; } // G: query heads per kv head
  int64_t seqlen(int64_t b) const;           // keys of sequence b
  bool paged() const { return page_size > 0; }
  bool has_seqlens() const { return seqlens_on_device || !seqlens_k.empty(); } // SEQLENS_K=1
  int64_t max_pages() const; // block-table width: cdiv(N_K, page_size)
  int64_t num_pages() const { return B * max_pages(); }
  double scale() const;
  int64_t head_dim_tile() const; // HEAD_DIM: the power of two >= max(D, 16)
  std::string str() const;       // "B2 H8 H_KV2 N_Q4 N_K1000 D32 f16 causal=2 pages=64 seqlens=[..]"
};

// Inputs in the kernels' layouts: Q [B, N_Q, H, D]; K and V [B, N_K, H_KV, D] or [num_pages, page_size, H_KV,
// D]; BLOCK_TABLE i32 [B, max_pages] (a shuffled permutation of the pages; one unused i32 when contiguous);
// SEQLENS_K i32 [B].
struct DecodeInputs {
  HostBuffer q, k, v, block_table, seqlens_k;
};
// Q, K, V uniformly random in [-scale, scale] (rounded to the dtype), pages dealt to sequences in a random
// order (a shuffled block table); cache rows past a sequence's keys hold NaN, so that reading one shows.
DecodeInputs make_decode_inputs(const DecodeProblem& p, uint64_t seed, double scale);

// O [B, H, N_Q, D] and LSE [B, H, N_Q] (logical order) in double from the rounded inputs: per sequence,
// reference_forward over its keys; a query that sees no key gets O = 0 and LSE = −inf.
AttentionResult decode_reference(const DecodeProblem& p, const DecodeInputs& in);

// The kernels' configs for `p`: the split kernel with BLOCK_M = G·N_Q rounded up to a power of two (16 to
// 64), BLOCK_N = min(64, page_size), HEAD_DIM, EVEN_D, CAUSAL, DTYPE, PAGED, SEQLENS_K; the combine kernel
// with HEAD_DIM, EVEN_D, DTYPE.
Config default_decode_split_config(const DecodeProblem& p);
Config default_decode_combine_config(const DecodeProblem& p);
// A kiln::Error when a split config disagrees with `p` (HEAD_DIM < D, EVEN_D, CAUSAL, DTYPE, PAGED, SEQLENS_K
// wrong) or has BLOCK_N above the page size.
void check_decode_split_config(const DecodeProblem& p, const Config& c);
// Size arguments of the two kernels' grids and tuning keys.
SizeArgs decode_size_args(const DecodeProblem& p, int64_t num_splits);

// Query-row tiles a kv head's packed rows (its H / H_KV query heads × N_Q) take at the split config's BLOCK_M:
// the split kernel runs B · H_KV · this programs a split.
int64_t decode_row_tiles(const DecodeProblem& p, const Config& split_config);

// How many splits to cut each sequence's keys into, after FlashDecoding's rule: the fewest splits whose waves
// of programs (B · H_KV · row tiles, times the splits) over the GPU's `slots` (the programs it runs at once:
// SMs × the split kernel's resident CTAs an SM, resident_ctas_per_sm) are at least 85 % as efficient as the
// best, at most one per key tile and 128; a wave's efficiency is the share of its slots the last wave fills.
// Not FlashDecoding's "none when the programs nearly fill the SMs": 512 programs on an H100 whose SMs hold 3
// split CTAs each are 1.3 waves, and 2 splits measured 22 % faster there (worklog §43).
int64_t choose_num_splits(int64_t programs, int64_t key_tiles, int64_t slots);
// The slots the heuristic is given where no GPU says how many it has (the interpreter: `kiln decode
// --interpret`, the C ABI's kiln_decode_host): an H100's 132 SMs.
constexpr int64_t kInterpreterDecodeSlots = 132;

// f32 workspace the kernel pair needs: O_PART [num_splits, B·H·N_Q, D] then LSE_PART [num_splits, B·H·N_Q].
int64_t decode_workspace_floats(int64_t rows, int64_t D, int64_t num_splits);

// Runs the pair on outputs (and workspace) poisoned with NaN; returns O and LSE in logical order. `split` and
// `combine` as default_decode_*_config give them, tiles changed.
AttentionResult run_decode(const DecodeProblem& p, const Config& split, const Config& combine,
                           int64_t num_splits, const DecodeInputs& in,
                           Executor executor = Executor::Interpreter);

} // namespace kiln
