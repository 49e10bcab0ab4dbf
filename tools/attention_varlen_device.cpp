#include "tools/attention_varlen_device.h"

#include "kernels/attention/attention_varlen_bwd_api.h"
#include "kernels/attention/attention_varlen_bwd_problem.h"
#include "tools/attention_runs.h"

namespace kiln::cli {

namespace {

// A gradient's device buffer shaped as `like`, NaN until a backward writes it (a row it misses shows).
rt::DeviceBuffer poisoned_like(const HostBuffer& like) {
  HostBuffer nan(like.dtype, like.numel());
  poison(nan);
  return upload(nan);
}

} // namespace

DeviceVarlen::DeviceVarlen(const VarlenProblem& p, const AttentionInputs& in, const HostBuffer* dout)
    : DeviceVarlen(p, in, dout, make_varlen_outputs(p)) {}

DeviceVarlen::DeviceVarlen(const VarlenProblem& p, const AttentionInputs& in, const HostBuffer* dout,
                           const AttentionOutputs& poisoned)
    : p_(p), q_(upload(in.q)), k_(upload(in.k)), v_(upload(in.v)), o_(upload(poisoned.o)), lse_(upload(poisoned.lse)),
      dout_(dout ? upload(*dout) : rt::DeviceBuffer(16)),
      dq_(poisoned_like(in.q)), dk_(poisoned_like(in.k)), dv_(poisoned_like(in.v)),
      cu_q_(rt::DeviceBuffer::from_host(p.cu_seqlens_q())),
      cu_k_(rt::DeviceBuffer::from_host(p.cu_seqlens_k())) {
  batch_.cu_seqlens_q = attention::TensorRef::contiguous(cu_q_.ptr(), DType::i32, {p.batch() + 1});
  batch_.cu_seqlens_k = attention::TensorRef::contiguous(cu_k_.ptr(), DType::i32, {p.batch() + 1});
  batch_.max_seqlen_q = p.max_seqlen_q();
  batch_.max_seqlen_k = p.max_seqlen_k();
}

attention::TensorRef DeviceVarlen::packed(const rt::DeviceBuffer& b, const PackedStrides& st, bool kv) const {
  return attention::TensorRef{b.ptr(), p_.dtype, {kv ? p_.total_k() : p_.total_q(), kv ? p_.H_KV : p_.H, p_.D},
                              {st.token, st.head, 1}};
}

attention::TensorRef DeviceVarlen::lse() const {
  return attention::TensorRef::contiguous(lse_.ptr(), DType::f32, {p_.H, p_.total_q()});
}

attention::AttentionOptions DeviceVarlen::options() const {
  attention::AttentionOptions o;
  o.causal = static_cast<attention::Causal>(p_.causal);
  o.k_transposed = p_.k_transposed;
  o.exact_masked_v = p_.exact_masked_v;
  return o;
}

void DeviceVarlen::forward(const std::optional<Config>& config) const {
  attention::AttentionOptions o = options();
  o.config = config;
  const VarlenStrides s = varlen_strides(p_);
  attention::forward_varlen(packed(q_, s.q, false), packed(k_, s.k, true), packed(v_, s.v, true),
                            packed(o_, s.o, false), lse(), batch_, o);
}

void DeviceVarlen::backward(bool deterministic) const {
  attention::BackwardOptions o;
  static_cast<attention::AttentionOptions&>(o) = options();
  o.deterministic = deterministic;
  const VarlenStrides s = varlen_strides(p_); // dO and dQ are strided as Q, dK and dV as K and V
  attention::backward_varlen(packed(q_, s.q, false), packed(k_, s.k, true), packed(v_, s.v, true),
                             packed(o_, s.o, false), lse(), packed(dout_, s.q, false), packed(dq_, s.q, false),
                             packed(dk_, s.k, true), packed(dv_, s.v, true), batch_, o);
}

AttentionResult DeviceVarlen::outputs() const {
  rt::Stream().synchronize();
  AttentionOutputs out = make_varlen_outputs(p_);
  o_.copy_to_host(out.o.bytes.data(), out.o.bytes.size());
  lse_.copy_to_host(out.lse.bytes.data(), out.lse.bytes.size());
  return gather_varlen_outputs(p_, out);
}

AttentionGrads DeviceVarlen::gradients() const {
  rt::Stream().synchronize();
  AttentionBwdBuffers b; // only the gradients: what gather_varlen_grads reads
  b.dq = download(dq_, p_.dtype, varlen_q_numel(p_));
  b.dk = download(dk_, p_.dtype, varlen_kv_numel(p_));
  b.dv = download(dv_, p_.dtype, varlen_kv_numel(p_));
  return gather_varlen_grads(p_, b);
}

} // namespace kiln::cli
