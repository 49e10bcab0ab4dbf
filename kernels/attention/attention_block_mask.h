// Block masks (FlexAttention's BlockMask): which key tiles each query tile of an attention problem visits,
// classified once from the mask (the built-in N_K and CAUSAL rules and the mask mods) and reused by the
// forward:
//
//   empty   every (row, key) pair of the tile is hidden: never visited;
//   full    every pair with a row < N_Q is visible: visited with no masking work;
//   partial the rest: visited with the mask applied.
//
// The block mask of a problem at tiles (BLOCK_M, BLOCK_N) is four i32 tensors, dense and row-major:
//   full_count, partial_count    [B, H, cdiv(N_Q, BLOCK_M)]                      tiles in each list
//   full_index, partial_index    [B, H, cdiv(N_Q, BLOCK_M), cdiv(N_K, BLOCK_N)]  key tile indices, ascending
// (entries past a list's count are not written). The backward's dK/dV kernel (one program per key tile) reads
// the same classification by key tile, four more tensors (the "by-key" lists):
//   full_count, partial_count    [B, H, cdiv(N_K, BLOCK_N)]                      tiles in each list
//   full_index, partial_index    [B, H, cdiv(N_K, BLOCK_N), cdiv(N_Q, BLOCK_M)]  query tile indices, ascending
// where, as dK/dV visits a full query tile with no bounds check, rows past N_Q count as hidden: the tail query
// tile is partial there. Both are computed by a DSL kernel, attention_block_mask, which evaluates the mask on
// every tile at run time (one program per query tile, or with BY_KEY=1 per key tile, and batch·head), so the
// same code runs in the interpreter and on the GPU, and mask mods reading tensors (document ids) work.
//
// fa2_fwd_block_mask is the FA2 forward that walks the lists instead of key ranges: per query tile, the full
// tiles unmasked, then the partial tiles masked, each tile's K and V block pointers set from the index read
// from the list. fa2_bwd_dq_block_mask walks the same lists; fa2_bwd_dkdv_block_mask the by-key lists
// (fa2_bwd_block_mask.h). Their tiles must be the block mask's (attention_block_mask_host.h checks).
#pragma once

#include "dsl/registry.h"
#include "kernels/attention/attention_mods.h"

#include <functional>

namespace kiln {

// The block mask's four tensors as kernel arguments: <prefix>full_count, <prefix>full_index,
// <prefix>partial_count, <prefix>partial_index (i32 pointers), in that order.
struct BlockMaskArgs {
  Value full_count, full_index, partial_count, partial_index;
};
BlockMaskArgs declare_block_mask_args(KernelBuilder& kb, const std::string& prefix);

// The classifier: args full_count, full_index, partial_count, partial_index, then B, H, H_KV, N_Q, N_K (i32),
// then the mask mods' tensors (mod_<name> and strides, as the forward takes them). Params BLOCK_M, BLOCK_N,
// CAUSAL, BY_KEY (1: the by-key lists); grid (cdiv(N_Q, BLOCK_M), B·H, 1), with BY_KEY (cdiv(N_K, BLOCK_N),
// B·H, 1). attention_block_mask_def(mods) is named after the mask mods
// (score mods and sinks do not change which keys are seen: they are dropped, see block_mask_mods).
Kernel build_attention_block_mask(const Config& config);
Kernel build_attention_block_mask_with_mods(const Config& config, const AttentionMods& mods);
const KernelDef& attention_block_mask_def();
const KernelDef& attention_block_mask_def(const AttentionMods& mods);

// The mods a block mask depends on: the mask mods alone.
AttentionMods block_mask_mods(const AttentionMods& mods);

// The forward with a block mask: fa2_fwd's args, the mods' tensors, then bm_full_count, bm_full_index,
// bm_partial_count, bm_partial_index. fa2_fwd's params and BLOCK_MASK_RUNS: 1 for a block mask whose lists
// are all runs (BlockMask::runs, attention_block_mask_runs.h), whose kernel walks only key ranges. VARLEN must
// be 0, and WARP_SPECIALIZE, PINGPONG and PRODUCT_AHEAD too unless BLOCK_MASK_RUNS=1 (a kiln::Error otherwise);
// the config space has none of them (the host API tunes over block_mask_tuning_def's).
const KernelDef& fa2_fwd_block_mask_def();
void check_block_mask_config(const Config& config); // the kiln::Error above
const KernelDef& fa2_fwd_block_mask_def(const AttentionMods& mods);
// What the host API tunes a forward over a block mask with: fa2_fwd_block_mask_def(mods) whose space is
// fa2_fwd's configs at the block mask's tiles (with `runs`, the warp-specialised ones too) with BLOCK_MASK_RUNS
// set to `runs`, named "<name>@<block_m>x<block_n>[+runs]". Empty when fa2_fwd's space has no such tiles: the
// tuner then runs the base config.
const KernelDef& fa2_fwd_block_mask_tuning_def(const AttentionMods& mods, int64_t block_m, int64_t block_n,
                                               bool runs);

// Where a block mask's lists of tile `tile` (of `tiles` per batch·head) are: the row of the count tensors
// (i64, named bm_row), and where its list starts in the index tensors, whose lists are `list_len` long.
Value block_mask_row(const Value& off_hz, const Value& tiles, const Value& tile);
Value block_mask_list(const Value& row, const Value& list_len);

// The loops over one row's lists, tiles `block` wide: the full tiles, tile(start, false), then the partial
// ones, tile(start, true), where start = index · block. seek(start) sets the caller's block pointers at a tile
// before tile() is called on it; tile() advances them by one tile. A list that is one run of consecutive tiles
// is walked as a range [first, last + 1) · block (a loop the code generator pipelines), any other tile by tile
// (start named <full|partial>_start_<dim>); with `runs_only` (every list is a run) the tile-by-tile loops are
// left out. The forward and dQ walk key tiles, dK/dV query tiles.
void walk_block_mask_lists(const BlockMaskArgs& bm, const Value& row, const Value& list, int64_t block,
                           const char* dim, bool runs_only, const std::function<void(const Value&)>& seek,
                           const std::function<void(Value, bool)>& tile);

// The forward's loops over the block mask's lists for the query tile start_m of batch·head off_hz: the full
// tiles, tile(start_n, false), then the partial ones, tile(start_n, true); seek(start_n) points the caller's K
// and V block pointers at each tile's keys before tile() is called (tile() may advance them by one tile). A list that is one run of
// consecutive tiles is walked as a key range (a loop the code generator pipelines), any other tile by tile;
// with `runs_only` (every list is a run) the tile-by-tile loops are left out.
void for_each_block_mask_tile(const BlockMaskArgs& bm, const AttentionArgs& a, const AttentionTileParams& tp,
                              const Value& off_hz, const Value& start_m, bool runs_only,
                              const std::function<void(const Value&)>& seek,
                              const std::function<void(Value, bool)>& tile);

} // namespace kiln
