#include "kernels/attention/attention_varlen_tiles.h"

#include "dsl/dsl.h"

namespace kiln {

VarlenArgs declare_varlen_args(KernelBuilder& kb) {
  return VarlenArgs{kb.arg_ptr("CU_SEQLENS_Q", i32), kb.arg_ptr("CU_SEQLENS_K", i32)};
}

namespace {
// [start, end) of sequence b from B + 1 offsets, clamped into [0, total] with end >= start.
std::pair<Value, Value> sequence_span(const Value& cu_seqlens, const Value& b, const Value& total) {
  Value start = minimum(maximum(load(cu_seqlens + b), 0), total);
  Value end = minimum(maximum(load(cu_seqlens + (b + 1)), start), total);
  return {start, end};
}
} // namespace

SequenceView varlen_sequence(const AttentionArgs& a, const VarlenArgs& v, const Value& off_hz, const Value& m0) {
  Value off_b = off_hz / a.H; // the sequence
  Value off_h = off_hz % a.H;
  auto [start_q, end_q] = sequence_span(v.cu_seqlens_q, off_b, a.N_Q); // a.N_Q is TOTAL_Q here
  auto [start_k, end_k] = sequence_span(v.cu_seqlens_k, off_b, a.N_K); // a.N_K is TOTAL_K
  Value n_q = (end_q - start_q).named("seq_n_q");
  // A tile past the sequence's rows sees no key, so that it does no work: its loops end at 0.
  Value n_k = where(m0 < n_q, end_k - start_k, 0).named("seq_n_k");

  SequenceView s;
  s.args = a;
  s.args.N_Q = n_q;
  s.args.N_K = n_k;
  Value off_hkv = (off_h / (a.H / a.H_KV)).to(i64); // GQA/MQA: H / H_KV query heads share one kv head
  Value off_h64 = off_h.to(i64);
  Value row0 = start_q.to(i64), key0 = start_k.to(i64);
  s.bases.q = (a.q + (row0 * a.stride_qn + off_h64 * a.stride_qh)).named("q_base");
  s.bases.k = (a.k + (key0 * a.stride_kn + off_hkv * a.stride_kh)).named("k_base");
  s.bases.v = (a.v + (key0 * a.stride_vn + off_hkv * a.stride_vh)).named("v_base");
  s.bases.o = (a.o + (row0 * a.stride_on + off_h64 * a.stride_oh)).named("o_base");
  s.bases.lse_row0 = (off_h64 * a.N_Q + row0).named("lse_row0"); // LSE [H, TOTAL_Q]
  return s;
}

} // namespace kiln
