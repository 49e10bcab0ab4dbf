// Attention backward, step 3 (deterministic): dQ of one query tile, with no atomics. One program per
// (BLOCK_M query rows, batch·head) walks the key tiles its rows see, as the forward does (unmasked tiles,
// then the tiles that cross the causal diagonal or N_K), recomputing P and dP:
//   S = Q Kᵀ, P = exp2(S · scale · log2 e − LSE · log2 e), dP = dO Vᵀ, dS = P ∘ (dP − Delta), dQ += dS K
// and stores dQ · sm_scale. fa2_bwd_dq_convert is the atomic variant's last step instead.
//
// Args: the backward list (attention_bwd_args.h). Params: the attention params. Grid: (cdiv(N_Q, BLOCK_M),
// B·H, 1).
#pragma once

#include "dsl/registry.h"

namespace kiln {

struct AttentionMods;

Kernel build_fa2_bwd_dq(const Config& config);
const KernelDef& fa2_bwd_dq_def(); // built once per process
// With score and mask mods (attention_mods.h): the scores recomputed with them (the key tiles the forward
// visits), dS multiplied by d score_mod / d score; the mods' tensors follow the arguments above (mod_<name>,
// then one i64 stride per dim). The def is named after the mods' identity; empty mods give fa2_bwd_dq_def().
Kernel build_fa2_bwd_dq_with_mods(const Config& config, const AttentionMods& mods);
const KernelDef& fa2_bwd_dq_def(const AttentionMods& mods); // one per distinct mods
// Over the forward's lists of a block mask (fa2_bwd_block_mask.h: fa2_bwd_dq_block_mask_def).
Kernel build_fa2_bwd_dq_with_block_mask(const Config& config, const AttentionMods& mods);

} // namespace kiln
