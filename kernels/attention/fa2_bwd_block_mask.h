// The attention backward over a block mask (attention_block_mask.h), FlexAttention's: each kernel walks lists
// instead of ranges. dK/dV (one program per key tile and batch·kv head) walks, for every query head of the
// group, the query tiles the block mask's by-key lists give for its key tile: full ones unmasked, partial ones
// masked, empty ones never. dQ (one program per query tile) walks the forward's lists of key tiles, as
// fa2_fwd_block_mask does. A list that is one run of tiles is walked as a range (pipelined).
//
// Args: the backward's list (attention_bwd_args.h), the mods' tensors (mod_<name>, then one i64 stride per dim),
// then bm_full_count, bm_full_index, bm_partial_count, bm_partial_index: the by-key lists for dK/dV, the
// forward's for dQ. Params: fa2_bwd_dkdv's and fa2_bwd_dq's; ATOMIC_DQ must be 0 (dQ is its own kernel over
// the lists: the backward over a block mask is the deterministic pair). Both kernels run at the block mask's
// tiles (BLOCK_M query rows, BLOCK_N keys), so that one classification gives both orientations.
#pragma once

#include "dsl/registry.h"

namespace kiln {

struct AttentionMods;

const KernelDef& fa2_bwd_dkdv_block_mask_def();
const KernelDef& fa2_bwd_dkdv_block_mask_def(const AttentionMods& mods); // named after the mods, as fa2_bwd_dkdv's
const KernelDef& fa2_bwd_dq_block_mask_def();
const KernelDef& fa2_bwd_dq_block_mask_def(const AttentionMods& mods);

// A kiln::Error naming the config unless the dK/dV config can run over a block mask (ATOMIC_DQ=0).
void check_block_mask_bwd_config(const Config& dkdv);

} // namespace kiln
