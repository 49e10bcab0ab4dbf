// Attention backward, step 2: dK and dV of one key tile (and, with ATOMIC_DQ=1, dQ by f32 atomic adds).
// One program per (BLOCK_N keys, batch·kv head); K_j and V_j stay on chip while the program walks the
// query tiles that see them, for every query head of the kv head's group (GQA/MQA sum in the program, in
// a fixed order: deterministic). Per query tile, written transposed so that every register operand of a
// product is its left-hand side (as in Triton's tutorial):
//   Sᵀ = K Qᵀ, Pᵀ = exp2(Sᵀ · scale · log2 e − LSE · log2 e), dV += Pᵀ dO,
//   dPᵀ = V dOᵀ, dSᵀ = Pᵀ ∘ (dPᵀ − Delta), dK += dSᵀ Q          (dK scaled by sm_scale once, at the end)
// Causal: query tiles wholly above the diagonal are never visited; only tiles that cross the diagonal, the
// query tail or (for the last key tile) the key tail are masked.
//
// ATOMIC_DQ=1 adds each step's dQ = dS K (BLOCK_M rows) to the f32 accumulator through a block pointer (on sm_90a
// staged in shared memory and added by the TMA unit: codegen/plan_bulk_reductions.h; elsewhere by `red`); over 8
// warps that product takes a warp split of its own (codegen/assign_layouts.h), so 64-row steps suit it too.
//
// Args: the backward list (attention_bwd_args.h). Params: the attention params (BLOCK_M query rows per
// step, BLOCK_N keys per program, ...) and ATOMIC_DQ. Grid: (cdiv(N_K, BLOCK_N), B·H_KV, 1).
#pragma once

#include "dsl/registry.h"

namespace kiln {

struct AttentionMods;

Kernel build_fa2_bwd_dkdv(const Config& config);
const KernelDef& fa2_bwd_dkdv_def(); // built once per process
// With score and mask mods (attention_mods.h), on the transposed tile (q_idx (1, BLOCK_M), kv_idx (BLOCK_N,
// 1)): P recomputed with the mods, dSᵀ multiplied by d score_mod / d score; with a mask mod every query tile
// from the causal rule's first on is visited masked, its work skipped (an if) when the key tiles the mods'
// key bounds give it (mod_key_tiles) miss this program's. The mods' tensors follow the arguments (mod_<name>,
// then one i64 stride per dim). The def is named after the mods' identity; empty mods give
// fa2_bwd_dkdv_def().
Kernel build_fa2_bwd_dkdv_with_mods(const Config& config, const AttentionMods& mods);
const KernelDef& fa2_bwd_dkdv_def(const AttentionMods& mods); // one per distinct mods
// Over a block mask's by-key lists of query tiles (fa2_bwd_block_mask.h: fa2_bwd_dkdv_block_mask_def).
Kernel build_fa2_bwd_dkdv_with_block_mask(const Config& config, const AttentionMods& mods);

} // namespace kiln
