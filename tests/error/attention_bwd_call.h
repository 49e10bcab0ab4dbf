// A valid call of the attention backward's host API at fake device addresses, for the error tests that break
// one thing in it (tests/error/attention_bwd_*_test.cpp). The addresses are never dereferenced.
#pragma once

#include "kernels/attention/attention_bwd_api.h"

namespace kiln_test {

// A backward call's arguments: tensors at distinct, 16-byte aligned fake device addresses far apart.
struct BwdCall {
  kiln::attention::TensorRef q, k, v, o, lse, dout, dq, dk, dv;
  kiln::attention::BackwardOptions options;
};

// B=2, H=4, H_KV=2, N_Q=64, N_K=80, D=64, f16, bhsd, contiguous.
inline BwdCall valid_bwd_call(int64_t n_q = 64) {
  using kiln::DType;
  using kiln::attention::TensorRef;
  BwdCall c;
  c.q = TensorRef::contiguous(0x10000000, DType::f16, {2, 4, n_q, 64});
  c.k = TensorRef::contiguous(0x20000000, DType::f16, {2, 2, 80, 64});
  c.v = TensorRef::contiguous(0x30000000, DType::f16, {2, 2, 80, 64});
  c.o = TensorRef::contiguous(0x40000000, DType::f16, {2, 4, n_q, 64});
  c.lse = TensorRef::contiguous(0x50000000, DType::f32, {2, 4, n_q});
  c.dout = TensorRef::contiguous(0x60000000, DType::f16, {2, 4, n_q, 64});
  c.dq = TensorRef::contiguous(0x70000000, DType::f16, {2, 4, n_q, 64});
  c.dk = TensorRef::contiguous(0x80000000, DType::f16, {2, 2, 80, 64});
  c.dv = TensorRef::contiguous(0x90000000, DType::f16, {2, 2, 80, 64});
  return c;
}

} // namespace kiln_test
