// Block masks in the attention host API: built once on kiln's device from the options' mask mods (and
// causal mode) for given sizes and tiles, then passed to forward() through AttentionOptions::block_mask for
// as many calls (and layers) as share the sizes and the mask:
//
//   AttentionOptions opts;
//   opts.mods.mask = {document_mask(), sliding_window(256, 0)};
//   opts.mod_tensors = {{"q_doc", q_doc}, {"kv_doc", kv_doc}};
//   opts.block_mask = make_block_mask({B, H, H_KV, N_Q, N_K}, opts, 128, 64);
//   forward(q, k, v, o, lse, opts);  // visits only the key tiles the block mask lists
//   backward(q, k, v, o, lse, dout, dq, dk, dv, bopts);  // bopts with the same mods and block mask
//
// The forward then runs fa2_fwd_block_mask (attention_block_mask.h) at the block mask's tiles: options.config
// when given (its BLOCK_M and BLOCK_N must be the block mask's), else the default config with the block
// mask's tiles; it is not autotuned. The backward runs fa2_bwd_dkdv_block_mask over the by-key lists and
// fa2_bwd_dq_block_mask over the forward's (fa2_bwd_block_mask.h), both at the block mask's tiles (dK/dV:
// BLOCK_N keys a program, BLOCK_M query rows a step), on options.config / dq_config when given (their tiles
// must be the block mask's, ATOMIC_DQ 0), else block_mask_bwd_configs; not autotuned, always deterministic. options.config may not set WARP_SPECIALIZE, PINGPONG or PRODUCT_AHEAD
// (validate_attention_args refuses them with a block mask). The block mask is computed on options.stream, asynchronously: a forward
// on another stream must wait for it.
#pragma once

#include "kernels/attention/attention_api.h"
#include "kernels/attention/attention_block_mask_host.h"
#include "runtime/device.h"

#include <array>
#include <memory>
#include <source_location>

namespace kiln::attention {

// The sizes a block mask is built for: the forward's B, H (query heads), H_KV, N_Q and N_K.
struct BlockMaskSizes {
  int64_t B = 1, H = 1, H_KV = 1, N_Q = 0, N_K = 0;
};

// A block mask on kiln's device: what it was built for, the four i32 tensors of the forward's lists and the
// four of the by-key lists (attention_block_mask.h).
struct BlockMask {
  BlockMaskLayout layout;
  rt::DeviceBuffer full_count, full_index, partial_count, partial_index;
  rt::DeviceBuffer key_full_count, key_full_index, key_partial_count, key_partial_index;
  // Every list is one run of consecutive key tiles or empty (attention_block_mask_runs.h): the forward then
  // runs fa2_fwd_block_mask with BLOCK_MASK_RUNS=1, which may be warp-specialised.
  bool runs = false;

  // The tensors' device addresses in the kernels' order: the forward's lists (the forward, dQ), the by-key
  // lists (dK/dV).
  std::array<uint64_t, 4> addresses() const;
  std::array<uint64_t, 4> key_addresses() const;
  // The lists copied to the host (synchronizes the device): for tests and inspection.
  HostBlockMask to_host() const;
};

// What make_block_mask checks without touching the GPU: the sizes (at least 1 each, within the kernels'
// indices, H a multiple of H_KV), the tiles (powers of two in [16, 256]), options.mods and
// options.mod_tensors as forward() checks them (the mask mods' tensors are what the classifier reads). A
// kiln::Error ending in the caller's line otherwise.
struct ValidatedBlockMask {
  BlockMaskLayout layout;
  AttentionProblem problem;
  std::vector<ValidatedModTensor> mask_tensors; // the mask mods' tensors, in the classifier's order
};
ValidatedBlockMask validate_block_mask_args(const BlockMaskSizes& sizes, const AttentionOptions& options,
                                            int64_t block_m, int64_t block_n,
                                            std::source_location where = std::source_location::current());

// The config a forward over `bm` runs when options.config is empty: block_mask_fwd_config(bm.layout, p,
// bm.runs), the default at the block mask's tiles, 16 rows a warp (at most the default's warps), without
// WARP_SPECIALIZE, PINGPONG or PRODUCT_AHEAD, BLOCK_MASK_RUNS as bm.runs. It is also the base the tuner varies
// (fa2_fwd_block_mask_tuning_def).
Config block_mask_default_config(const BlockMask& bm, const AttentionProblem& p);

// Validates, then runs the classifier (attention_block_mask, both orientations) and attention_block_mask_runs
// on options.stream, and waits for the stream to read whether every list is a run (BlockMask::runs). Throws
// kiln::Error when no
// GPU driver is available (after validating).
std::shared_ptr<const BlockMask>
make_block_mask(const BlockMaskSizes& sizes, const AttentionOptions& options, int64_t block_m,
                int64_t block_n, std::source_location where = std::source_location::current());

} // namespace kiln::attention
