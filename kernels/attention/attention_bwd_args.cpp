#include "kernels/attention/attention_bwd_args.h"

#include "dsl/dsl.h"

namespace kiln {

AttentionBwdArgs declare_attention_bwd_args(KernelBuilder& kb, DType dt, bool packed) {
  AttentionBwdArgs a;
  AttentionArgs& f = a.fwd;
  f.q = kb.arg_ptr("Q", dt);
  f.k = kb.arg_ptr("K", dt);
  f.v = kb.arg_ptr("V", dt);
  f.o = kb.arg_ptr("O", dt);
  a.dout = kb.arg_ptr("dO", dt);
  f.lse = kb.arg_ptr("LSE", f32);
  a.delta = kb.arg_ptr("Delta", f32);
  a.dq = kb.arg_ptr("dQ", dt);
  a.dk = kb.arg_ptr("dK", dt);
  a.dv = kb.arg_ptr("dV", dt);
  a.dq_acc = kb.arg_ptr("DQ_ACC", f32);
  f.sm_scale = kb.arg("sm_scale", f32);
  f.B = kb.arg("B", i32);
  f.H = kb.arg("H", i32);
  f.H_KV = kb.arg("H_KV", i32);
  f.N_Q = kb.arg(packed ? "TOTAL_Q" : "N_Q", i32);
  f.N_K = kb.arg(packed ? "TOTAL_K" : "N_K", i32);
  f.D = kb.arg("D", i32);
  const std::pair<Value*, const char*> strides[] = {
      {&f.stride_qb, "stride_qb"},   {&f.stride_qh, "stride_qh"},   {&f.stride_qn, "stride_qn"},
      {&f.stride_kb, "stride_kb"},   {&f.stride_kh, "stride_kh"},   {&f.stride_kn, "stride_kn"},
      {&f.stride_vb, "stride_vb"},   {&f.stride_vh, "stride_vh"},   {&f.stride_vn, "stride_vn"},
      {&f.stride_ob, "stride_ob"},   {&f.stride_oh, "stride_oh"},   {&f.stride_on, "stride_on"},
      {&a.stride_dob, "stride_dob"}, {&a.stride_doh, "stride_doh"}, {&a.stride_don, "stride_don"},
      {&a.stride_dqb, "stride_dqb"}, {&a.stride_dqh, "stride_dqh"}, {&a.stride_dqn, "stride_dqn"},
      {&a.stride_dkb, "stride_dkb"}, {&a.stride_dkh, "stride_dkh"}, {&a.stride_dkn, "stride_dkn"},
      {&a.stride_dvb, "stride_dvb"}, {&a.stride_dvh, "stride_dvh"}, {&a.stride_dvn, "stride_dvn"}};
  for (auto [v, name] : strides)
    *v = kb.arg(name, i64);
  return a;
}

AttentionBwdBases attention_bwd_bases(const AttentionBwdArgs& a, const Value& off_b, const Value& off_h) {
  const AttentionArgs& f = a.fwd;
  Value b64 = off_b.to(i64);
  Value h64 = off_h.to(i64);
  Value hkv64 = (off_h / (f.H / f.H_KV)).to(i64); // GQA/MQA: H / H_KV query heads share one kv head
  AttentionBwdBases r;
  r.q = (f.q + (b64 * f.stride_qb + h64 * f.stride_qh)).named("q_base");
  r.o = (f.o + (b64 * f.stride_ob + h64 * f.stride_oh)).named("o_base");
  r.dout = (a.dout + (b64 * a.stride_dob + h64 * a.stride_doh)).named("do_base");
  r.dq = (a.dq + (b64 * a.stride_dqb + h64 * a.stride_dqh)).named("dq_base");
  r.k = (f.k + (b64 * f.stride_kb + hkv64 * f.stride_kh)).named("k_base");
  r.v = (f.v + (b64 * f.stride_vb + hkv64 * f.stride_vh)).named("v_base");
  r.dk = (a.dk + (b64 * a.stride_dkb + hkv64 * a.stride_dkh)).named("dk_base");
  r.dv = (a.dv + (b64 * a.stride_dvb + hkv64 * a.stride_dvh)).named("dv_base");
  r.row0 = ((b64 * f.H.to(i64) + h64) * f.N_Q.to(i64)).named("row0");
  return r;
}

Value bwd_q_block_ptr(const AttentionBwdArgs& a, const Value& base, const Value& stride_n, int64_t rows,
                      const AttentionTileParams& tp, const Operand& offset) {
  return bwd_q_block_ptr(a, base, stride_n, rows, tp, offset, tp.whole_head_dim());
}

Value bwd_q_block_ptr(const AttentionBwdArgs& a, const Value& base, const Value& stride_n, int64_t rows,
                      const AttentionTileParams&, const Operand& offset, const HeadDimPiece& piece) {
  return make_block_ptr(base, {a.fwd.N_Q, a.fwd.D}, {stride_n, 1}, {offset, piece.start}, {rows, piece.width},
                        {1, 0});
}

Value bwd_kv_block_ptr(const AttentionBwdArgs& a, const Value& base, const Value& stride_n, int64_t rows,
                       const AttentionTileParams& tp, const Operand& offset) {
  return bwd_kv_block_ptr(a, base, stride_n, rows, tp, offset, tp.whole_head_dim());
}

Value bwd_kv_block_ptr(const AttentionBwdArgs& a, const Value& base, const Value& stride_n, int64_t rows,
                       const AttentionTileParams&, const Operand& offset, const HeadDimPiece& piece) {
  return make_block_ptr(base, {a.fwd.N_K, a.fwd.D}, {stride_n, 1}, {offset, piece.start}, {rows, piece.width},
                        {1, 0});
}

Value bwd_k_block_ptr(const AttentionBwdArgs& a, const AttentionBwdBases& b, int64_t rows,
                      const AttentionTileParams& tp, const Operand& offset) {
  return bwd_k_block_ptr(a, b, rows, tp, offset, tp.whole_head_dim());
}

Value bwd_k_block_ptr(const AttentionBwdArgs& a, const AttentionBwdBases& b, int64_t rows,
                      const AttentionTileParams& tp, const Operand& offset, const HeadDimPiece& piece) {
  if (tp.k_transposed) // Kᵀ: (D, N_K) with the head dim contiguous, so order (0, 1)
    return make_block_ptr(b.k, {a.fwd.D, a.fwd.N_K}, {1, a.fwd.stride_kn}, {piece.start, offset},
                          {piece.width, rows}, {0, 1});
  return bwd_kv_block_ptr(a, b.k, a.fwd.stride_kn, rows, tp, offset, piece);
}

Value bwd_row_block_ptr(const AttentionBwdArgs& a, const Value& ptr, const Value& row0, int64_t rows,
                        const Operand& offset) {
  return make_block_ptr(ptr + row0, {a.fwd.N_Q}, {1}, {offset}, {rows}, {0});
}

Value bwd_dq_acc_block_ptr(const AttentionBwdArgs& a, const Value& row0, int64_t rows, const AttentionTileParams& tp,
                           const Operand& offset) {
  return bwd_dq_acc_block_ptr(a, row0, rows, offset, tp.whole_head_dim());
}

Value bwd_dq_acc_block_ptr(const AttentionBwdArgs& a, const Value& row0, int64_t rows, const Operand& offset,
                           const HeadDimPiece& piece) {
  return make_block_ptr(a.dq_acc + row0 * a.fwd.D.to(i64), {a.fwd.N_Q, a.fwd.D}, {a.fwd.D, 1},
                        {offset, piece.start}, {rows, piece.width}, {1, 0});
}

std::vector<ParamDef> attention_bwd_param_defs() {
  std::vector<ParamDef> params = attention_param_defs();
  for (ParamDef& p : params)
    if (p.name == "BLOCK_M" || p.name == "BLOCK_N")
      p.default_value = 64;
  return params;
}

ParamDef atomic_dq_param() {
  return ParamDef::flag("ATOMIC_DQ", 0,
                        "1 accumulates dQ with f32 atomic adds inside the dK/dV program (not deterministic), then "
                        "casts it; 0 computes dQ in its own deterministic kernel");
}

} // namespace kiln
