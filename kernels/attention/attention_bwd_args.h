// The argument list every attention backward kernel takes (preprocess, dK/dV, dQ, dQ convert), so that the
// host launches them all with one list: each kernel reads the tensors it needs and ignores the rest.
//
// Args, in order: Q, K, V, O, dO (pointers of the DTYPE element type), LSE (f32 [B, H, N_Q] contiguous, the
// forward's natural-log logsumexp), Delta (f32 [B, H, N_Q] contiguous: rowsum(dO ∘ O), written by
// fa2_bwd_preprocess), dQ, dK, dV (DTYPE; dK and dV have H_KV heads as K and V do), DQ_ACC (f32
// [B, H, N_Q, D] contiguous: the atomic variant's dQ accumulator, unused otherwise), sm_scale (f32),
// B, H, H_KV, N_Q, N_K, D (i32), then i64 strides in elements (batch, head, sequence) of Q, K, V, O, dO,
// dQ, dK, dV in that order. The head dim is contiguous (stride 1) in every tensor.
#pragma once

#include "kernels/attention/attention_tiles.h"

namespace kiln {

// Positions in that list of the tensors the kernels write (for tuning launches that redirect outputs).
inline constexpr size_t kBwdArgDq = 7, kBwdArgDk = 8, kBwdArgDv = 9, kBwdArgDqAcc = 10;

struct AttentionBwdArgs {
  AttentionArgs fwd; // Q, K, V, O, LSE, sm_scale, sizes and the strides of Q, K, V, O
  Value dout, delta, dq, dk, dv, dq_acc;
  Value stride_dob, stride_doh, stride_don, stride_dqb, stride_dqh, stride_dqn;
  Value stride_dkb, stride_dkh, stride_dkn, stride_dvb, stride_dvh, stride_dvn;
};
// `packed` (VARLEN=1, fa2_bwd_varlen.h) names N_Q and N_K TOTAL_Q and TOTAL_K: the rows of the packed tensors.
AttentionBwdArgs declare_attention_bwd_args(KernelBuilder& kb, DType dtype, bool packed = false);

// Base pointers of one (batch, query head h): Q, O, dO, dQ of head h; K, V, dK, dV of its kv head
// h / (H / H_KV). row0 indexes this head's first row in LSE, Delta and (times D) DQ_ACC. i64 offsets.
struct AttentionBwdBases {
  Value q, k, v, o, dout, dq, dk, dv;
  Value row0; // i64: (b · H + h) · N_Q
};
AttentionBwdBases attention_bwd_bases(const AttentionBwdArgs& a, const Value& off_b, const Value& off_h);

// The backward's block pointers over one head: (rows, HEAD_DIM) windows of Q, O, dO, dQ at query row
// `offset`; K (row-major or as Kᵀ, as K_TRANSPOSED says), V, dK, dV at key `offset`; and (rows,) windows of
// LSE and Delta. With a `piece`, the window covers that piece's columns of the head dim (SPLIT_D).
Value bwd_q_block_ptr(const AttentionBwdArgs& a, const Value& base, const Value& stride_n, int64_t rows,
                      const AttentionTileParams& tp, const Operand& offset);
Value bwd_q_block_ptr(const AttentionBwdArgs& a, const Value& base, const Value& stride_n, int64_t rows,
                      const AttentionTileParams& tp, const Operand& offset, const HeadDimPiece& piece);
Value bwd_kv_block_ptr(const AttentionBwdArgs& a, const Value& base, const Value& stride_n, int64_t rows,
                       const AttentionTileParams& tp, const Operand& offset);
Value bwd_kv_block_ptr(const AttentionBwdArgs& a, const Value& base, const Value& stride_n, int64_t rows,
                       const AttentionTileParams& tp, const Operand& offset, const HeadDimPiece& piece);
Value bwd_k_block_ptr(const AttentionBwdArgs& a, const AttentionBwdBases& b, int64_t rows,
                      const AttentionTileParams& tp, const Operand& offset);
Value bwd_k_block_ptr(const AttentionBwdArgs& a, const AttentionBwdBases& b, int64_t rows,
                      const AttentionTileParams& tp, const Operand& offset, const HeadDimPiece& piece);
Value bwd_row_block_ptr(const AttentionBwdArgs& a, const Value& ptr, const Value& row0, int64_t rows,
                        const Operand& offset);

// (rows, HEAD_DIM) window of the f32 dQ accumulator DQ_ACC ([B, H, N_Q, D] contiguous) at query row `offset`.
Value bwd_dq_acc_block_ptr(const AttentionBwdArgs& a, const Value& row0, int64_t rows,
                           const AttentionTileParams& tp, const Operand& offset);
// The same window over one piece of the head dim (columns piece.start ... + piece.width).
Value bwd_dq_acc_block_ptr(const AttentionBwdArgs& a, const Value& row0, int64_t rows, const Operand& offset,
                           const HeadDimPiece& piece);

// The attention params with the backward's tiles as defaults (64 x 64, as default_bwd_configs picks at
// D <= 64), so that `kiln emit` and a default config show what runs.
std::vector<ParamDef> attention_bwd_param_defs();

// The parameters of the dK/dV and preprocess kernels beyond the attention tiles: ATOMIC_DQ.
ParamDef atomic_dq_param();

} // namespace kiln
