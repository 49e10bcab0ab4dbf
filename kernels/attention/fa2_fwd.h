// FlashAttention-2 forward: O = softmax(Q Kᵀ · sm_scale) V and the row logsumexp LSE, one program
// per (BLOCK_M rows of Q, batch·head), streaming K/V tiles with an online softmax in the log2 domain.
//
// Args, in order: Q, K, V, O (pointers of the DTYPE element type), LSE (f32 pointer, [B, H, N_Q]
// contiguous), sm_scale (f32), B, H, H_KV, N_Q, N_K, D (i32; D is the real head dim), then i64
// strides in elements: stride_qb, stride_qh, stride_qn, stride_kb, stride_kh, stride_kn, stride_vb,
// stride_vh, stride_vn, stride_ob, stride_oh, stride_on. The head dim is contiguous (stride 1) in
// every tensor. Q/O have H heads, K/V H_KV (GQA/MQA: query head h reads kv head h / (H / H_KV)).
//
// Params: BLOCK_M, BLOCK_N (powers of two ≥ 16), HEAD_DIM (power of two ≥ max(D, 16): the tile
// width), SPLIT_D (1: two tiles of HEAD_DIM/2 and HEAD_DIM/4 columns instead, for D = 96 or 192; set from D),
// EVEN_D (1 when D fills the head-dim tiles: no boundary check along D), CAUSAL (0 none, 1 top-left as
// PyTorch is_causal: key j visible to query i iff j ≤ i; 2 bottom-right as FlashAttention ≥ 2.1:
// iff j ≤ i + N_K − N_Q), K_TRANSPOSED (1: K is read through a block pointer over Kᵀ, (HEAD_DIM,
// BLOCK_N) with order (0, 1); 0: K tiles are loaded row-major and transposed on chip), DTYPE (0 f16,
// 1 bf16, 2 f32), TF32 (f32 only: the two dots in tf32), MIN_BLOCKS_PER_SM (CTAs that must fit on an SM:
// the launch bound that caps registers; a tuning knob, 1 by default).
//
// Grid: (cdiv(N_Q, BLOCK_M), B·H, 1). A query row with no visible key gets O = 0 and LSE = −inf.
#pragma once

#include "dsl/registry.h"

#include <string>

namespace kiln {

struct AttentionMods;

Kernel build_fa2_fwd(const Config& config);
const KernelDef& fa2_fwd_def(); // built once per process
// The forward with score and mask mods (attention_mods.h): a def named after the mods' identity, whose
// kernels take the mods' tensors after the arguments above (mod_<name>, then one i64 stride per dim). Empty
// mods give fa2_fwd_def() itself. One def per distinct mods (AttentionMods::identity_key()), built on first
// use and kept for the process's life. Defined in attention_mods_host.cpp.
Kernel build_fa2_fwd_with_mods(const Config& config, const AttentionMods& mods);
const KernelDef& fa2_fwd_def(const AttentionMods& mods);
// fa2_fwd's prune for a problem with `mods` (the def's prune is this with none): the static persistent grid
// (PERSISTENT=1) where later query tiles are heavier (later_query_tiles_heavier: a causal mask, or a mask mod
// whose later rows see more keys), and tiles wider than the (power-of-two padded) sequence.
std::string fa2_fwd_prune(const Config& config, const SizeArgs& sizes, const AttentionMods& mods);
// The forward over a block mask's lists of key tiles (attention_block_mask.h: fa2_fwd_block_mask_def).
Kernel build_fa2_fwd_with_block_mask(const Config& config, const AttentionMods& mods);

} // namespace kiln
