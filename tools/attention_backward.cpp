#include "tools/attention_backward.h"

#include "kernels/attention/attention_block_mask_api.h"
#include "kernels/attention/attention_bwd_api.h"
#include "runtime/device.h"

namespace kiln::cli {
namespace {

AttentionGrads run_interpreted(const BackwardRequest& r) {
  const AttentionProblem& p = r.problem;
  // The forward's O and LSE as kiln's forward computes them, interpreted, in place of the reference's.
  const AttentionResult fwd = run_fa2_interpreted(p, r.fwd_config ? *r.fwd_config : default_fa2_config(p),
                                                  r.inputs, Executor::Interpreter);
  AttentionBwdBuffers b = make_bwd_buffers(p, r.inputs, r.dout);
  set_forward_outputs(p, fwd, b);
  run_bwd(p, default_bwd_configs(p, /*atomic_dq=*/!r.deterministic), b, Executor::Interpreter);
  return gather_grads(p, b);
}

// Device copies of the request's tensors and the API calls over them (dense, in the problem's layout).
struct DeviceBackward {
  const BackwardRequest& r;
  rt::DeviceBuffer q, k, v, dout, o, lse, dq, dk, dv;
  std::vector<rt::DeviceBuffer> mod_buffers; // the mods' tensors, as options.mod_tensors point at them
  attention::BackwardOptions options;

  explicit DeviceBackward(const BackwardRequest& req)
      : r(req), q(upload(req.inputs.q)), k(upload(req.inputs.k)), v(upload(req.inputs.v)),
        dout(upload(req.dout)), o(req.inputs.q.bytes.size()),
        lse(static_cast<size_t>(req.problem.B * req.problem.H * req.problem.N_Q) * sizeof(float)),
        dq(req.inputs.q.bytes.size()), dk(req.inputs.k.bytes.size()), dv(req.inputs.k.bytes.size()) {
    const AttentionProblem& p = r.problem;
    options.causal = static_cast<attention::Causal>(p.causal);
    options.k_transposed = p.k_transposed;
    options.tf32 = p.tf32;
    options.exact_masked_v = p.exact_masked_v;
    options.sm_scale = p.sm_scale;
    options.layout = p.bshd_layout ? "bshd" : "bhsd";
    options.deterministic = r.deterministic;
    options.mods = r.mods;
    mod_buffers.reserve(r.mod_tensors.size());
    for (const auto& [name, t] : r.mod_tensors) {
      mod_buffers.push_back(upload(t.data));
      options.mod_tensors[name] = attention::TensorRef{mod_buffers.back().ptr(),
                                                       t.data.dtype,
                                                       {t.shape.begin(), t.shape.end()},
                                                       {t.strides.begin(), t.strides.end()}};
    }
    if (r.block_mask_tiles) // built once from the mods, as a training loop would, and used by both passes
      options.block_mask = attention::make_block_mask({p.B, p.H, p.H_KV, p.N_Q, p.N_K}, options,
                                                      r.block_mask_tiles->first, r.block_mask_tiles->second);
  }

  attention::TensorRef ref(const rt::DeviceBuffer& b, bool kv) const {
    const AttentionProblem& p = r.problem;
    const int64_t h = kv ? p.H_KV : p.H, n = kv ? p.N_K : p.N_Q;
    return attention::TensorRef::contiguous(b.ptr(), p.dtype,
                                            p.bshd_layout ? llvm::SmallVector<int64_t, 4>{p.B, n, h, p.D}
                                                          : llvm::SmallVector<int64_t, 4>{p.B, h, n, p.D});
  }
  attention::TensorRef lse_ref() const {
    return attention::TensorRef::contiguous(lse.ptr(), DType::f32, {r.problem.B, r.problem.H, r.problem.N_Q});
  }

  void forward() const {
    attention::AttentionOptions fo = options;
    fo.config = r.fwd_config;
    attention::forward(ref(q, false), ref(k, true), ref(v, true), ref(o, false), lse_ref(), fo);
  }
  void backward() const {
    attention::backward(ref(q, false), ref(k, true), ref(v, true), ref(o, false), lse_ref(), ref(dout, false),
                        ref(dq, false), ref(dk, true), ref(dv, true), options);
  }
};

} // namespace

AttentionGrads run_attention_backward(const BackwardRequest& r, Executor executor) {
  if (executor == Executor::Interpreter)
    return run_interpreted(r);
  const AttentionProblem& p = r.problem;
  rt::current_device();
  DeviceBackward d(r);
  d.forward();
  d.backward();
  const AttentionStrides s = attention_strides(p);
  AttentionGrads g;
  g.dq = logical_tensor(download(d.dq, p.dtype, q_numel(p)), s.q, p.B, p.H, p.N_Q, p.D);
  g.dk = logical_tensor(download(d.dk, p.dtype, kv_numel(p)), s.k, p.B, p.H_KV, p.N_K, p.D);
  g.dv = logical_tensor(download(d.dv, p.dtype, kv_numel(p)), s.k, p.B, p.H_KV, p.N_K, p.D);
  return g;
}

BackwardTiming time_attention_backward(const BackwardRequest& r, int reps) {
  rt::current_device();
  DeviceBackward d(r);
  d.forward();
  BackwardTiming t;
  t.backward = time_gpu_calls([&] { d.backward(); }, reps);
  t.step = time_gpu_calls(
      [&] {
        d.forward();
        d.backward();
      },
      reps);
  return t;
}

} // namespace kiln::cli
