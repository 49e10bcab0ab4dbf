#include "capi/host_attention.h"

#include "capi/host_rows.h"
#include "kernels/attention/attention_block_mask.h"
#include "kernels/attention/attention_bwd_problem.h"
#include "kernels/attention/attention_mods_host.h"
#include "kernels/attention/fa2_bwd_block_mask.h"
#include "kernels/attention/fa2_bwd_sink.h"
#include "kernels/attention/fa2_fwd.h"

#include <cstring>

namespace kiln::capi {
namespace {

// One [B, heads, n, D] tensor's rows (b, h, i), each D elements.
RowShape q_rows(const AttentionProblem& p) { return {{p.B, p.H, p.N_Q}, p.D}; }
RowShape kv_rows(const AttentionProblem& p) { return {{p.B, p.H_KV, p.N_K}, p.D}; }

llvm::SmallVector<int64_t, 4> outer(const TensorStrides& s) { return {s.b, s.h, s.n}; }

// The caller's tensor at `address` (strides `from`) as a dense buffer with the kernels' strides `to`.
HostBuffer gather(uint64_t address, DType dtype, const TensorStrides& from, const TensorStrides& to,
                  const RowShape& r, const char* name) {
  return gather_rows(address, dtype, outer(from), outer(to), r, name);
}

// The dense buffer `buf` (strides `from`) written into the caller's tensor at `address` (strides `to`).
void scatter(const HostBuffer& buf, const TensorStrides& from, uint64_t address, const TensorStrides& to,
             const RowShape& r) {
  scatter_rows(buf, outer(from), address, outer(to), r);
}

// LSE is f32 [B, H, N_Q] and contiguous (validated), as the kernels store it.
HostBuffer gather_lse(const AttentionProblem& p, uint64_t address) {
  HostBuffer buf(DType::f32, p.B * p.H * p.N_Q, "lse");
  std::memcpy(buf.bytes.data(), host_bytes(address), buf.bytes.size());
  return buf;
}

// d loss / d sink (options.dsink) from the buffers of a backward that has run (Delta written), as
// attention::backward's sink kernel computes it, written into the caller's dense f32 tensor.
void sink_gradient_host(const AttentionProblem& p, const attention::AttentionOptions& mods_of,
                        ModTensorValues& mod_tensors, AttentionBwdBuffers& b, const attention::TensorRef& dsink) {
  const bool per_head = dsink.shape.size() == 1;
  std::vector<InterpArg> args = fa2_bwd_interp_args(p, b);
  const std::vector<InterpArg> mod_args = mod_interp_args(p, mods_of.mods, mod_tensors);
  args.insert(args.end(), mod_args.begin(), mod_args.end());
  HostBuffer out(DType::f32, per_head ? p.H : p.B * p.H * p.N_Q, "dsink");
  args.push_back(InterpArg::ptr(out));
  const KernelDef& def = fa2_bwd_sink_def(mods_of.mods);
  const Config config = fa2_bwd_sink_config(p, per_head);
  interpret(def.build(config), def.grid(config, attention_size_args(p)), args);
  std::memcpy(host_bytes(dsink.data), out.bytes.data(), out.bytes.size());
}

// A per-head dsink of a call with no rows: zeros (nothing for a per-row one, which has no elements then).
void zero_sink_gradient_host(const attention::BackwardOptions& options) {
  if (options.dsink && options.dsink->shape.size() == 1 && options.dsink->shape[0] > 0)
    std::memset(host_bytes(options.dsink->data), 0, static_cast<size_t>(options.dsink->shape[0]) * sizeof(float));
}

// The checks the device path makes of a block mask for a host call of `p` with `options`, naming `entry`:
// validate_attention_args's, with the forward's config `options.config`; for the backward (`dq_config` given
// when it is, `bwd`) check_block_mask_bwd_configs on options.config (dK/dV's) and dq_config instead.
void check_host_block_mask(const HostBlockMask& bm, const AttentionProblem& p,
                           const attention::AttentionOptions& options, bool bwd, const Config* dq_config,
                           const char* entry) {
  const Config* config = options.config ? &*options.config : nullptr;
  try {
    check_block_mask(bm.layout, p, options.mods, bwd ? nullptr : config);
    if (bwd) {
      check_block_mask_bwd_configs(bm.layout, config, dq_config);
    } else if (config) {
      check_block_mask_fwd_config(*config, bm.runs);
    }
  } catch (const Error& e) {
    fail("{}: options.block_mask: {}", entry, e.what());
  }
}

} // namespace

ModTensorValues host_mod_tensors(const attention::AttentionOptions& options,
                                 const std::vector<attention::ValidatedModTensor>& validated) {
  ModTensorValues out;
  for (const attention::ValidatedModTensor& m : validated) {
    const attention::TensorRef& t = options.mod_tensors.at(m.tensor_name);
    const uint64_t bytes = m.end - m.data;
    ModTensorData d{HostBuffer(t.dtype, static_cast<int64_t>(bytes) / dtype_bytes(t.dtype), m.name),
                    {t.shape.begin(), t.shape.end()},
                    {t.strides.begin(), t.strides.end()}};
    std::memcpy(d.data.bytes.data(), host_bytes(m.data), bytes);
    out.emplace(m.tensor_name, std::move(d)); // a tensor two specs read is copied once
  }
  return out;
}

void attention_forward_host(const attention::TensorRef& q, const attention::TensorRef& k,
                            const attention::TensorRef& v, const attention::TensorRef& o,
                            const std::optional<attention::TensorRef>& lse,
                            const attention::AttentionOptions& options, const HostBlockMask* block_mask) {
  const attention::ValidatedAttention va = attention::validate_attention_args(q, k, v, o, lse, options);
  if (block_mask)
    check_host_block_mask(*block_mask, va.problem, options, /*bwd=*/false, nullptr, "kiln_attention_forward_host");
  if (va.empty)
    return;
  const AttentionProblem& p = va.problem;
  const AttentionStrides dense = attention_strides(p);
  AttentionInputs in{gather(va.q, p.dtype, va.strides.q, dense.q, q_rows(p), "q"),
                     gather(va.k, p.dtype, va.strides.k, dense.k, kv_rows(p), "k"),
                     gather(va.v, p.dtype, va.strides.v, dense.v, kv_rows(p), "v")};
  AttentionOutputs out = make_outputs(p);
  std::vector<InterpArg> args = fa2_interp_args(p, in, out);
  ModTensorValues mod_tensors = host_mod_tensors(options, va.mod_tensors);
  const std::vector<InterpArg> mod_args = mod_interp_args(p, options.mods, mod_tensors);
  args.insert(args.end(), mod_args.begin(), mod_args.end());
  if (block_mask) {
    HostBlockMask lists = *block_mask;
    append_block_mask_args(args, lists, /*by_key=*/false);
    const Config config =
        options.config ? *options.config : block_mask_fwd_config(block_mask->layout, p, block_mask->runs);
    const KernelDef& def = fa2_fwd_block_mask_def(options.mods);
    interpret(def.build(config), def.grid(config, attention_size_args(p)), args);
  } else {
    const Config config = options.config ? *options.config : default_fa2_config(p);
    const KernelDef& def = fa2_fwd_def(options.mods); // fa2_fwd_def() itself without mods
    interpret(def.build(config), def.grid(config, attention_size_args(p)), args);
  }
  scatter(out.o, dense.o, va.o, va.strides.o, q_rows(p));
  if (va.lse)
    std::memcpy(host_bytes(*va.lse), out.lse.bytes.data(), out.lse.bytes.size());
}

void attention_backward_host(const attention::TensorRef& q, const attention::TensorRef& k,
                             const attention::TensorRef& v, const attention::TensorRef& o,
                             const attention::TensorRef& lse, const attention::TensorRef& dout,
                             const attention::TensorRef& dq, const attention::TensorRef& dk,
                             const attention::TensorRef& dv, const attention::BackwardOptions& options,
                             const HostBlockMask* block_mask) {
  const attention::ValidatedBackward vb =
      attention::validate_attention_bwd_args(q, k, v, o, lse, dout, dq, dk, dv, options);
  const AttentionProblem& p = vb.fwd.problem;
  if (block_mask)
    check_host_block_mask(*block_mask, p, options, /*bwd=*/true, options.dq_config ? &*options.dq_config : nullptr,
                          "kiln_attention_backward_host");
  if (p.B == 0 || p.N_Q == 0)
    zero_sink_gradient_host(options);
  if (p.B == 0)
    return;
  const AttentionStrides dense = attention_strides(p);
  if (p.N_Q == 0) { // no query sees a key: the key gradients are zero, as attention::backward makes them
    const HostBuffer zeros(p.dtype, p.B * p.H_KV * p.N_K * p.D, "zeros");
    scatter(zeros, dense.k, vb.dk_data, vb.dk, kv_rows(p));
    scatter(zeros, dense.v, vb.dv_data, vb.dv, kv_rows(p));
    return;
  }
  AttentionInputs in{gather(vb.fwd.q, p.dtype, vb.fwd.strides.q, dense.q, q_rows(p), "q"),
                     gather(vb.fwd.k, p.dtype, vb.fwd.strides.k, dense.k, kv_rows(p), "k"),
                     gather(vb.fwd.v, p.dtype, vb.fwd.strides.v, dense.v, kv_rows(p), "v")};
  const HostBuffer d_out = gather(vb.dout_data, p.dtype, vb.dout, dense.q, q_rows(p), "dout");
  // The buffers with the caller's O and LSE in place of the reference forward's that make_bwd_buffers puts.
  AttentionBwdBuffers b = make_bwd_buffers(p, in, d_out);
  b.o = gather(vb.fwd.o, p.dtype, vb.fwd.strides.o, dense.o, q_rows(p), "o");
  b.lse = gather_lse(p, *vb.fwd.lse);
  // Over a block mask: its tiles, always the deterministic pair (as attention::backward).
  AttentionBwdConfigs configs = block_mask ? block_mask_bwd_configs(block_mask->layout, p)
                                           : default_bwd_configs(p, /*atomic_dq=*/!options.deterministic);
  if (options.config)
    configs.dkdv = *options.config;
  if (options.dq_config)
    configs.dq = *options.dq_config;
  ModTensorValues mod_tensors = host_mod_tensors(options, vb.fwd.mod_tensors);
  const std::vector<InterpArg> mod_args = mod_interp_args(p, options.mods, mod_tensors);
  if (block_mask) {
    HostBlockMask lists = *block_mask; // the kernels' arguments are mutable buffers
    BwdLoopKernels kernels{&fa2_bwd_dkdv_block_mask_def(options.mods), &fa2_bwd_dq_block_mask_def(options.mods),
                           mod_args, mod_args};
    append_block_mask_args(kernels.dkdv_args, lists, /*by_key=*/true);
    append_block_mask_args(kernels.dq_args, lists, /*by_key=*/false);
    run_bwd(p, configs, b, Executor::Interpreter, kernels);
  } else {
    run_bwd(p, configs, b, Executor::Interpreter, options.mods, mod_args);
  }
  if (options.dsink)
    sink_gradient_host(p, options, mod_tensors, b, *options.dsink);
  scatter(b.dq, dense.q, vb.dq_data, vb.dq, q_rows(p));
  scatter(b.dk, dense.k, vb.dk_data, vb.dk, kv_rows(p));
  scatter(b.dv, dense.v, vb.dv_data, vb.dv, kv_rows(p));
}

} // namespace kiln::capi
