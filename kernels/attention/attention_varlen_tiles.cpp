#include "kernels/attention/attention_varlen_tiles.h"

#include "dsl/dsl.h"

namespace kiln {

VarlenArgs declare_varlen_args(KernelBuilder& kb) {
  return VarlenArgs{kb.arg_ptr("CU_SEQLENS_Q", i32), kb.arg_ptr("CU_SEQLENS_K", i32)};
}

namespace {
// [start, end) of sequence b from B + 1 offsets, clamped into [0, total] with end >= start.
std::pair<Value, Value> sequence_bounds(const Value& cu_seqlens, const Value& b, const Value& total) {
  Value start = minimum(maximum(load(cu_seqlens + b), 0), total);
  Value end = minimum(maximum(load(cu_seqlens + (b + 1)), start), total);
  return {start, end};
}
} // namespace

SequenceSpan read_sequence_span(const AttentionArgs& a, const VarlenArgs& v, const Value& off_b) {
  auto [start_q, end_q] = sequence_bounds(v.cu_seqlens_q, off_b, a.N_Q); // a.N_Q is TOTAL_Q here
  auto [start_k, end_k] = sequence_bounds(v.cu_seqlens_k, off_b, a.N_K); // a.N_K is TOTAL_K
  SequenceSpan s;
  s.row0 = start_q.to(i64).named("seq_row0");
  s.key0 = start_k.to(i64).named("seq_key0");
  s.n_q = (end_q - start_q).named("seq_n_q");
  s.n_k = (end_k - start_k).named("seq_n_k");
  s.total_q = a.N_Q;
  return s;
}

SequenceView varlen_sequence(const AttentionArgs& a, const VarlenArgs& v, const Value& off_hz,
                             const Value& m0) {
  Value off_b = off_hz / a.H; // the sequence
  Value off_h = off_hz % a.H;
  const SequenceSpan s = read_sequence_span(a, v, off_b);
  SequenceView view;
  view.args = a;
  view.args.N_Q = s.n_q;
  // A tile past the sequence's rows sees no key, so that it does no work: its loops end at 0.
  view.args.N_K = where(m0 < s.n_q, s.n_k, 0).named("tile_n_k");
  Value off_hkv = (off_h / (a.H / a.H_KV)).to(i64); // GQA/MQA: H / H_KV query heads share one kv head
  Value off_h64 = off_h.to(i64);
  view.bases.q = (a.q + (s.row0 * a.stride_qn + off_h64 * a.stride_qh)).named("q_base");
  view.bases.k = (a.k + (s.key0 * a.stride_kn + off_hkv * a.stride_kh)).named("k_base");
  view.bases.v = (a.v + (s.key0 * a.stride_vn + off_hkv * a.stride_vh)).named("v_base");
  view.bases.o = (a.o + (s.row0 * a.stride_on + off_h64 * a.stride_oh)).named("o_base");
  view.bases.lse_row0 = (off_h64 * s.total_q + s.row0).named("lse_row0"); // LSE [H, TOTAL_Q]
  return view;
}

AttentionBwdBases varlen_bwd_bases(const AttentionBwdArgs& a, const SequenceSpan& s, const Value& off_h) {
  const AttentionArgs& f = a.fwd;
  Value h64 = off_h.to(i64);
  Value hkv64 = (off_h / (f.H / f.H_KV)).to(i64); // GQA/MQA: H / H_KV query heads share one kv head
  AttentionBwdBases r;
  r.q = (f.q + (s.row0 * f.stride_qn + h64 * f.stride_qh)).named("q_base");
  r.o = (f.o + (s.row0 * f.stride_on + h64 * f.stride_oh)).named("o_base");
  r.dout = (a.dout + (s.row0 * a.stride_don + h64 * a.stride_doh)).named("do_base");
  r.dq = (a.dq + (s.row0 * a.stride_dqn + h64 * a.stride_dqh)).named("dq_base");
  r.k = (f.k + (s.key0 * f.stride_kn + hkv64 * f.stride_kh)).named("k_base");
  r.v = (f.v + (s.key0 * f.stride_vn + hkv64 * f.stride_vh)).named("v_base");
  r.dk = (a.dk + (s.key0 * a.stride_dkn + hkv64 * a.stride_dkh)).named("dk_base");
  r.dv = (a.dv + (s.key0 * a.stride_dvn + hkv64 * a.stride_dvh)).named("dv_base");
  r.row0 =
      (h64 * s.total_q.to(i64) + s.row0).named("row0"); // LSE, Delta [H, TOTAL_Q]; DQ_ACC [H, TOTAL_Q, D]
  return r;
}

} // namespace kiln
