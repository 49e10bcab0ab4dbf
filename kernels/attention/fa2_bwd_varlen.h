// The attention backward over variable-length (packed) sequences: the four backward kernels (preprocess,
// dK/dV, dQ, dQ convert) built with VARLEN=1, each its dense kernel's builder, not a copy
// (attention_varlen_tiles.h gives each program its sequence's rows, keys and bases), under names of their own
// (attention_varlen_defs.h).
//
// Args: the backward list (attention_bwd_args.h) read as packed tensors — Q, O, dO, dQ [TOTAL_Q, H, D]; K, V,
// dK, dV [TOTAL_K, H_KV, D]; LSE and Delta f32 [H, TOTAL_Q]; DQ_ACC f32 [H, TOTAL_Q, D] — with B the number
// of sequences and TOTAL_Q, TOTAL_K in the N_Q, N_K slots, each tensor's "batch" stride unused (0); then
// CU_SEQLENS_Q, CU_SEQLENS_K (i32 [B + 1]). Grids: the dense kernels' with the longest sequences for N_Q and
// N_K
// ((cdiv(MAX_SEQLEN_K, BLOCK_N), B·H_KV) for dK/dV; (cdiv(MAX_SEQLEN_Q, BLOCK_M), B·H) for the others).
// A tile past its sequence's end writes nothing; a sequence's keys that no query sees get dK = dV = 0, and
// its rows that see no key dQ = 0. No warp specialisation.
//
// With mods (attention_mods.h), dK/dV and dQ recompute each sequence's scores as fa2_fwd_varlen_def(mods)
// (b the sequence, positions within it), their mod tensors after CU_SEQLENS_K; a sink enters through LSE.
// Defined in attention_varlen_mods.cpp; empty mods give the defs above.
#pragma once

#include "dsl/registry.h"

namespace kiln {

struct AttentionMods;

const KernelDef& fa2_bwd_preprocess_varlen_def();
const KernelDef& fa2_bwd_dkdv_varlen_def();
const KernelDef& fa2_bwd_dq_varlen_def();
const KernelDef& fa2_bwd_dq_convert_varlen_def();
const KernelDef& fa2_bwd_dkdv_varlen_def(const AttentionMods& mods);
const KernelDef& fa2_bwd_dq_varlen_def(const AttentionMods& mods);

} // namespace kiln
