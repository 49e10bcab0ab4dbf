#include "capi/host_varlen.h"

#include "capi/host_attention.h"
#include "capi/host_rows.h"
#include "kernels/attention/attention_api_checks.h"
#include "kernels/attention/attention_varlen_mods.h"

#include <cstring>

namespace kiln::capi {
namespace {

using attention::ValidatedVarlen;

std::vector<int32_t> read_offsets(const attention::TensorRef& t) {
  std::vector<int32_t> out(static_cast<size_t>(t.shape[0]));
  std::memcpy(out.data(), host_bytes(t.data), out.size() * sizeof(int32_t));
  return out;
}

// The offsets of `batch`, read from host memory and checked as the device path checks its copies (errors
// naming `entry`).
VarlenOffsets checked_offsets(const ValidatedVarlen& v, const attention::VarlenBatch& batch,
                              const char* entry) {
  VarlenOffsets off{read_offsets(batch.cu_seqlens_q), read_offsets(batch.cu_seqlens_k), v.sizes.max_seqlen_q,
                    v.sizes.max_seqlen_k};
  attention::detail::check_varlen_offsets(v, off.cu_seqlens_q, off.cu_seqlens_k,
                                          attention::detail::ApiSite{entry, std::source_location::current()});
  return off;
}

// The packed problem of a validated call with checked offsets: each sequence's lengths, the shape's params.
VarlenProblem problem_of(const ValidatedVarlen& v, const VarlenOffsets& off) {
  VarlenProblem p;
  for (int64_t b = 0; b < v.sizes.B; ++b) {
    const size_t i = static_cast<size_t>(b);
    p.seqlens_q.push_back(off.cu_seqlens_q[i + 1] - off.cu_seqlens_q[i]);
    p.seqlens_k.push_back(off.cu_seqlens_k[i + 1] - off.cu_seqlens_k[i]);
  }
  const AttentionProblem& s = v.shape;
  p.H = s.H, p.H_KV = s.H_KV, p.D = s.D, p.dtype = s.dtype, p.causal = s.causal, p.sm_scale = s.sm_scale;
  p.k_transposed = s.k_transposed, p.tf32 = s.tf32, p.exact_masked_v = s.exact_masked_v;
  return p;
}

// A packed [total, heads, D] tensor's rows (token, head).
RowShape packed_rows(int64_t total, int64_t heads, int64_t D) { return {{total, heads}, D}; }
llvm::SmallVector<int64_t, 4> outer(const PackedStrides& s) { return {s.token, s.head}; }

HostBuffer gather_packed(uint64_t address, DType dtype, const PackedStrides& from, const PackedStrides& to,
                         const RowShape& rows, const char* name) {
  return gather_rows(address, dtype, outer(from), outer(to), rows, name);
}

void scatter_packed(const HostBuffer& buf, const PackedStrides& from, uint64_t address,
                    const PackedStrides& to, const RowShape& rows) {
  scatter_rows(buf, outer(from), address, outer(to), rows);
}

// The kernels' inputs: q, k, v gathered into the packed buffers of `p` (varlen_strides: no padding).
AttentionInputs gather_inputs(const ValidatedVarlen& v, const VarlenProblem& p) {
  const VarlenStrides dense = varlen_strides(p);
  const RowShape q_rows = packed_rows(p.total_q(), p.H, p.D), kv_rows = packed_rows(p.total_k(), p.H_KV, p.D);
  return {gather_packed(v.q, p.dtype, v.strides.q, dense.q, q_rows, "q"),
          gather_packed(v.k, p.dtype, v.strides.k, dense.k, kv_rows, "k"),
          gather_packed(v.v, p.dtype, v.strides.v, dense.v, kv_rows, "v")};
}

} // namespace

void attention_varlen_forward_host(const attention::TensorRef& q, const attention::TensorRef& k,
                                   const attention::TensorRef& v, const attention::TensorRef& o,
                                   const std::optional<attention::TensorRef>& lse,
                                   const attention::VarlenBatch& batch,
                                   const attention::AttentionOptions& options) {
  const ValidatedVarlen va = attention::validate_varlen_args(q, k, v, o, lse, batch, options);
  const VarlenOffsets offsets = checked_offsets(va, batch, "forward_varlen");
  if (va.empty)
    return;
  const VarlenProblem p = problem_of(va, offsets);
  ModTensorValues mod_tensors = host_mod_tensors(options, va.mod_tensors);
  const std::vector<InterpArg> mod_args =
      mod_interp_args(varlen_mod_size_args(va.sizes), options.mods, mod_tensors);
  const Config config = options.config ? *options.config : default_fa2_varlen_config(p);
  const AttentionResult r = run_fa2_varlen_interpreted(p, config, gather_inputs(va, p), offsets,
                                                       Executor::Interpreter, options.mods, mod_args);
  // O [total_q, H, D] and LSE [H, total_q] in logical order, the kernel's values exactly (their dtype's).
  const HostBuffer out = buffer_of(p.dtype, r.o, "o");
  scatter_packed(out, varlen_strides(p).o, va.o, va.strides.o, packed_rows(p.total_q(), p.H, p.D));
  if (va.lse) {
    const HostBuffer l = buffer_of(DType::f32, r.lse, "lse");
    std::memcpy(host_bytes(*va.lse), l.bytes.data(), l.bytes.size());
  }
}

void attention_varlen_backward_host(const attention::TensorRef& q, const attention::TensorRef& k,
                                    const attention::TensorRef& v, const attention::TensorRef& o,
                                    const attention::TensorRef& lse, const attention::TensorRef& dout,
                                    const attention::TensorRef& dq, const attention::TensorRef& dk,
                                    const attention::TensorRef& dv, const attention::VarlenBatch& batch,
                                    const attention::BackwardOptions& options) {
  const attention::ValidatedVarlenBackward vb =
      attention::validate_varlen_bwd_args(q, k, v, o, lse, dout, dq, dk, dv, batch, options);
  const ValidatedVarlen& va = vb.fwd;
  const VarlenOffsets offsets = checked_offsets(va, batch, "backward_varlen");
  const VarlenSizes& s = va.sizes;
  if (s.B == 0 || (s.total_q == 0 && s.total_k == 0))
    return;
  const VarlenProblem p = problem_of(va, offsets);
  const VarlenStrides dense = varlen_strides(p);
  const RowShape q_rows = packed_rows(s.total_q, s.H, s.D), kv_rows = packed_rows(s.total_k, s.H_KV, s.D);
  if (va.empty) { // no query rows: nothing flows back to the keys
    const HostBuffer zeros(p.dtype, s.total_k * s.H_KV * s.D, "zeros");
    scatter_packed(zeros, dense.k, vb.dk_data, vb.dk, kv_rows);
    scatter_packed(zeros, dense.v, vb.dv_data, vb.dv, kv_rows);
    return;
  }
  AttentionInputs in = gather_inputs(va, p);
  const int64_t rows = s.H * s.total_q;
  HostBuffer lse_buf(DType::f32, rows, "lse"); // f32 [H, total_q], contiguous (validated)
  std::memcpy(lse_buf.bytes.data(), host_bytes(*va.lse), lse_buf.bytes.size());
  AttentionBwdBuffers b{std::move(in.q),
                        std::move(in.k),
                        std::move(in.v),
                        gather_packed(va.o, p.dtype, va.strides.o, dense.o, q_rows, "o"),
                        gather_packed(vb.dout_data, p.dtype, vb.dout, dense.q, q_rows, "dout"),
                        std::move(lse_buf),
                        HostBuffer(DType::f32, rows, "Delta"),
                        HostBuffer(p.dtype, varlen_q_numel(p), "dQ"),
                        HostBuffer(p.dtype, varlen_kv_numel(p), "dK"),
                        HostBuffer(p.dtype, varlen_kv_numel(p), "dV"),
                        HostBuffer(DType::f32, rows * s.D, "DQ_ACC")};
  AttentionBwdConfigs configs = default_varlen_bwd_configs(p);
  if (options.config)
    configs.dkdv = *options.config;
  if (options.dq_config)
    configs.dq = *options.dq_config;
  ModTensorValues mod_tensors = host_mod_tensors(options, va.mod_tensors);
  const std::vector<InterpArg> mod_args =
      mod_interp_args(varlen_mod_size_args(va.sizes), options.mods, mod_tensors);
  run_varlen_bwd(p, configs, b, offsets, Executor::Interpreter, options.mods, mod_args);
  scatter_packed(b.dq, dense.q, vb.dq_data, vb.dq, q_rows);
  scatter_packed(b.dk, dense.k, vb.dk_data, vb.dk, kv_rows);
  scatter_packed(b.dv, dense.v, vb.dv_data, vb.dv, kv_rows);
}

} // namespace kiln::capi
