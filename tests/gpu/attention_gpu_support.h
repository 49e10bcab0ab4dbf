// What the attention API's GPU tests (forward and backward) share: host buffers to and from the device, a
// problem's tensors described as TensorRefs in its layout, and the API options that match a problem.
#pragma once

#include "kernels/attention/attention_api.h"
#include "runtime/device.h"

namespace kiln::testing_support {

inline rt::DeviceBuffer upload(const HostBuffer& b) {
  rt::DeviceBuffer d(b.bytes.size());
  d.copy_from_host(b.bytes.data(), b.bytes.size());
  return d;
}

inline HostBuffer download(const rt::DeviceBuffer& d, DType dtype, int64_t numel) {
  HostBuffer h(dtype, numel);
  d.copy_to_host(h.bytes.data(), h.bytes.size());
  return h;
}

// A [B, heads, N, D] tensor of `p` at `data`, shaped and strided as the problem's layout stores it.
inline attention::TensorRef describe(const AttentionProblem& p, uint64_t data, int64_t heads, int64_t n,
                                     const TensorStrides& s) {
  if (p.bshd_layout)
    return attention::TensorRef{data, p.dtype, {p.B, n, heads, p.D}, {s.b, s.n, s.h, 1}};
  return attention::TensorRef{data, p.dtype, {p.B, heads, n, p.D}, {s.b, s.h, s.n, 1}};
}

// A problem of the given sizes, dtype, causal mode (the CAUSAL code) and layout; the other fields default.
inline AttentionProblem problem(int64_t B, int64_t H, int64_t H_KV, int64_t N_Q, int64_t N_K, int64_t D, DType dtype,
                         int causal, bool bshd) {
  AttentionProblem p;
  p.B = B, p.H = H, p.H_KV = H_KV, p.N_Q = N_Q, p.N_K = N_K, p.D = D, p.dtype = dtype, p.causal = causal;
  p.bshd_layout = bshd;
  return p;
}

// The options that run `p`: causal mode, scale, K variant, tf32 and layout.
inline attention::AttentionOptions attention_options_for(const AttentionProblem& p) {
  attention::AttentionOptions o;
  o.causal = static_cast<attention::Causal>(p.causal);
  o.sm_scale = p.sm_scale;
  o.k_transposed = p.k_transposed;
  o.tf32 = p.tf32;
  o.layout = p.bshd_layout ? "bshd" : "bhsd";
  return o;
}

} // namespace kiln::testing_support
