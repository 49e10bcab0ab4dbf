// The host side of block masks (attention_block_mask.h): what a block mask was built for (its layout), the
// checks that a forward or a backward may use it, building one with the classifier kernel in the interpreter
// (or on the GPU, through the executor), and the FA2 forward and backward over one. The host API's device block masks
// (attention_api.h: attention::make_block_mask) share the layout and its checks.
#pragma once

#include "kernels/attention/attention_bwd_problem.h"
#include "kernels/attention/attention_mods_host.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

// What a block mask was built for: the sizes, the tiles, the built-in causal rule and the mask mods.
struct BlockMaskLayout {
  int64_t B = 0, H = 0, H_KV = 0, N_Q = 0, N_K = 0;
  int64_t block_m = 0, block_n = 0;
  int causal = 0;            // the CAUSAL param: 0 none, 1 top-left, 2 bottom-right
  std::string mask_mods;     // the mask mods' names ("document,sliding_window(8,0)"), for messages
  std::string mask_identity; // block_mask_mods(mods).identity(): names and a hash of their code

  int64_t q_tiles() const { return (N_Q + block_m - 1) / block_m; }
  int64_t k_tiles() const { return (N_K + block_n - 1) / block_n; }
  int64_t rows() const { return B * H * q_tiles(); }        // elements of a count tensor
  int64_t key_rows() const { return B * H * k_tiles(); }    // elements of a by-key count tensor
  std::string str() const; // "B2 H4 N_Q100 N_K130 tiles 64x32 causal=0 mask mods [document]"
};

// The layout of a block mask of `p` (sizes and causal mode) at tiles block_m x block_n for `mods`' mask
// mods. A kiln::Error when a tile is not a power of two in [16, 256] (the forward's tiles) or the problem is
// one the kernels cannot run (check_attention_problem).
BlockMaskLayout block_mask_layout(const AttentionProblem& p, const AttentionMods& mods, int64_t block_m,
                                  int64_t block_n);

// A kiln::Error, naming what the block mask was built for and what came, unless a forward of `p` with `mods`
// may use a block mask of `layout`: same B, H, N_Q, N_K and causal mode, the same mask mods (by identity:
// their code; the tensors they read are the caller's to keep equal), and, when `config` is given, its
// BLOCK_M and BLOCK_N equal to the block mask's tiles.
void check_block_mask(const BlockMaskLayout& layout, const AttentionProblem& p, const AttentionMods& mods,
                      const Config* config = nullptr);

// The forward's config over a block mask whose lists are all runs or not (`runs`: HostBlockMask::runs,
// BlockMask::runs): check_block_mask_config's rules (attention_block_mask.h), and a kiln::Error when it asks for
// the kernel of key ranges (BLOCK_MASK_RUNS=1) over lists that are not all runs.
void check_block_mask_fwd_config(const Config& config, bool runs);

// The forward's config over a block mask of `layout` when none is given: default_fa2_config(p) at its tiles,
// 16 rows a warp (at most the default's warps), without WARP_SPECIALIZE, PINGPONG or PRODUCT_AHEAD, and
// BLOCK_MASK_RUNS as `runs` (whether every list of the block mask is a run: HostBlockMask::runs).
Config block_mask_fwd_config(const BlockMaskLayout& layout, const AttentionProblem& p, bool runs);

// The backward's tiles over a block mask: both kernels run at the block mask's tiles, dK/dV with BLOCK_N keys
// a program and BLOCK_M query rows a step (the by-key lists), dQ with BLOCK_M rows a program and BLOCK_N keys
// a step (the forward's lists). A kiln::Error naming both tiles unless each config given has them, or when
// the dK/dV config has ATOMIC_DQ=1.
void check_block_mask_bwd_configs(const BlockMaskLayout& layout, const Config* dkdv, const Config* dq);
// default_bwd_configs(p) at the block mask's tiles (warps: 16 program rows each at least, at most the
// default's), the configs the backward over a block mask runs when none is given.
AttentionBwdConfigs block_mask_bwd_configs(const BlockMaskLayout& layout, const AttentionProblem& p);

// A block mask on the host: its layout, the four i32 tensors of the forward's lists and the four of the
// by-key lists (attention_block_mask.h).
struct HostBlockMask {
  BlockMaskLayout layout;
  HostBuffer full_count, full_index, partial_count, partial_index;
  HostBuffer key_full_count, key_full_index, key_partial_count, key_partial_index;
  bool runs = false; // every list is one run of consecutive tiles or empty (attention_block_mask_runs.h)

  // The key tiles of query tile m of (b, h) in one list, in the order the forward visits them.
  std::vector<int64_t> full_tiles(int64_t b, int64_t h, int64_t m) const;
  std::vector<int64_t> partial_tiles(int64_t b, int64_t h, int64_t m) const;
  // The query tiles that see key tile n of (b, h) in one list, in the order dK/dV visits them.
  std::vector<int64_t> full_query_tiles(int64_t b, int64_t h, int64_t n) const;
  std::vector<int64_t> partial_query_tiles(int64_t b, int64_t h, int64_t n) const;
};

// The block mask's four tensors of the forward's lists (forward, dQ) or, with `by_key`, of the by-key lists
// (dK/dV), appended to a kernel's interpreter arguments in the kernels' order. They point into `lists`, which
// must outlive the run (the kernels' arguments are mutable: pass a copy of a block mask to be kept).
void append_block_mask_args(std::vector<InterpArg>& args, HostBlockMask& lists, bool by_key);

// Evaluates the mask (built-in N_K and causal rules of `p`, and `mods`' mask mods reading `tensors`; score
// mods, sinks and their tensors are ignored) on every tile with the attention_block_mask kernel, in both
// orientations, then whether every list of the forward's is a run with attention_block_mask_runs.
HostBlockMask make_host_block_mask(const AttentionProblem& p, const AttentionMods& mods,
                                   const ModTensorValues& tensors, int64_t block_m, int64_t block_n,
                                   Executor executor = Executor::Interpreter);

// The FA2 forward with mods over the block mask `bm` on `config` (checked with check_block_mask; its
// BLOCK_MASK_RUNS=1 needs bm.runs), as
// run_fa2_with_mods: outputs poisoned with NaN, O and LSE in logical order.
AttentionResult run_fa2_with_block_mask(const AttentionProblem& p, const AttentionMods& mods,
                                        const ModTensorValues& tensors, const HostBlockMask& bm,
                                        const Config& config, const AttentionInputs& in,
                                        Executor executor = Executor::Interpreter);

// The whole backward with mods over the block mask `bm` on `configs` (checked with check_block_mask and
// check_block_mask_bwd_configs): O and LSE from reference_with_mods, then the preprocess, dK/dV over the by-key
// lists and dQ over the forward's (fa2_bwd_block_mask.h); dQ, dK, dV in logical order.
AttentionGrads run_bwd_with_block_mask(const AttentionProblem& p, const AttentionMods& mods,
                                       const ModTensorValues& tensors, const HostBlockMask& bm,
                                       const AttentionBwdConfigs& configs, const AttentionInputs& in,
                                       const HostBuffer& dout, Executor executor = Executor::Interpreter);

} // namespace kiln
