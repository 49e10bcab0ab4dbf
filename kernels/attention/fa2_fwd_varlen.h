// FlashAttention-2 forward over variable-length (packed) sequences, as FlashAttention's
// flash_attn_varlen_func: B sequences packed along one token dim, each its own attention problem with its own
// N_Q and N_K. It is fa2_fwd's kernel (fa2_fwd.cpp) built with VARLEN=1, not a copy: each program reads its
// sequence's first row and key and its lengths from the offsets (attention_varlen_tiles.h) and runs the dense
// kernel's body on them. Its own def, rather than a VARLEN param of fa2_fwd, so that fa2_fwd's configs,
// tuning results and generated code stay exactly what they are.
//
// Args: those of fa2_fwd (fa2_fwd.h) in the same order, read as packed tensors, then two more:
//   Q, O [TOTAL_Q, H, D] and K, V [TOTAL_K, H_KV, D] (head dim contiguous), LSE f32 [H, TOTAL_Q] contiguous
//   (FlashAttention's varlen LSE layout), sm_scale, B (sequences), H, H_KV, TOTAL_Q, TOTAL_K, D (i32) in the
//   dense kernel's N_Q and N_K slots, then the twelve i64 strides in fa2_fwd's order, where each tensor's
//   "batch" stride is unused (pass 0), its head stride steps heads and its "sequence" stride steps tokens;
//   then CU_SEQLENS_Q, CU_SEQLENS_K: i32 [B + 1] offsets, sequence b holding rows cu_q[b] .. cu_q[b+1] of Q/O
//   and keys cu_k[b] .. cu_k[b+1] of K/V.
// Causal masks align per sequence (top-left: key j visible to query i iff j <= i; bottom-right: iff
// j <= i + N_K_b - N_Q_b, positions within the sequence). A row that sees no key (N_K_b = 0, or bottom-right
// with N_Q_b > N_K_b) gets O = 0 and LSE = -inf, as in the dense kernel.
//
// Params: fa2_fwd's attention params, MIN_BLOCKS_PER_SM and MASK_EVERY_TILE, and VARLEN (always 1). No warp
// specialisation: TMA cannot map a block pointer whose shape (the sequence's length) is read from memory.
// Grid: (cdiv(MAX_SEQLEN_Q, BLOCK_M), B·H, 1); tiles past a sequence's end write nothing. The offsets are
// clamped into [0, TOTAL_Q] and [0, TOTAL_K], so no offsets can make a program leave the tensors; a sequence
// longer than MAX_SEQLEN_Q has its rows past the grid left unwritten (the host API checks the lengths).
// Size args: B, H, H_KV, TOTAL_Q, TOTAL_K, D, MAX_SEQLEN_Q, MAX_SEQLEN_K; tuned per bucket of H, TOTAL_Q,
// MAX_SEQLEN_Q and MAX_SEQLEN_K.
#pragma once

#include "dsl/registry.h"

namespace kiln {

struct AttentionMods;

Kernel build_fa2_fwd_varlen(const Config& config);
const KernelDef& fa2_fwd_varlen_def(); // built once per process
// With score and mask mods and sinks (attention_mods.h), applied per sequence: the mods see b, the sequence,
// and q_idx, kv_idx, N_Q and N_K of the sequence (positions within it, not packed rows); their tensors follow
// CU_SEQLENS_K (mod_<name>, then one i64 stride per dim), each dim sized by the padded batch
// (attention_varlen_mods.h: N_Q is MAX_SEQLEN_Q, N_K MAX_SEQLEN_K, B the sequences). The def is named after
// the mods' identity (one per distinct mods, as fa2_fwd_def(mods)); empty mods give fa2_fwd_varlen_def().
// Defined in attention_varlen_mods.cpp.
Kernel build_fa2_fwd_varlen_with_mods(const Config& config, const AttentionMods& mods);
const KernelDef& fa2_fwd_varlen_def(const AttentionMods& mods);
// An fa2_fwd config (default_fa2_config(problem), a point of its space) as fa2_fwd_varlen's: the same tiles,
// warps, stages and problem params, VARLEN=1, without the params the varlen kernel does not take.
Config varlen_config(const Config& fa2_config);

} // namespace kiln
