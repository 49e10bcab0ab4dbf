#include "kernels/attention/attention_varlen_bwd_problem.h"

#include "kernels/attention/attention_mods.h"
#include "kernels/attention/attention_varlen_defs.h"
#include "kernels/attention/fa2_bwd_varlen.h"

#include <cmath>
#include <random>

namespace kiln {

HostBuffer make_varlen_dout(const VarlenProblem& p, uint64_t seed, double scale) {
  check_varlen_problem(p);
  HostBuffer dout(p.dtype, varlen_q_numel(p), "dO");
  const PackedStrides s = varlen_strides(p).q;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(-scale, scale);
  for (int64_t i = 0; i < dout.numel(); ++i)
    dout.set(i, i % s.token < p.H * p.D ? dist(rng) : std::nan(""));
  return dout;
}

AttentionGrads varlen_reference_backward(const VarlenProblem& p, const AttentionInputs& in,
                                         const HostBuffer& dout) {
  return varlen_reference_backward(p, in, dout,
                                   [](int64_t, const AttentionProblem& sp, const AttentionTensors64& t) {
                                     return reference_backward(sp, t);
                                   });
}

AttentionGrads varlen_reference_backward(const VarlenProblem& p, const AttentionInputs& in,
                                         const HostBuffer& dout, const SequenceBackwardFn& backward) {
  check_varlen_problem(p);
  const VarlenStrides s = varlen_strides(p);
  const std::vector<int32_t> cu_q = p.cu_seqlens_q(), cu_k = p.cu_seqlens_k();
  const size_t q_elems = static_cast<size_t>(p.total_q() * p.H * p.D);
  const size_t kv_elems = static_cast<size_t>(p.total_k() * p.H_KV * p.D);
  AttentionGrads g;
  for (auto [v, n] : {std::pair{&g.dq, q_elems},
                      {&g.dq_magnitude, q_elems},
                      {&g.dk, kv_elems},
                      {&g.dk_magnitude, kv_elems},
                      {&g.dv, kv_elems},
                      {&g.dv_magnitude, kv_elems}})
    v->assign(n, 0.0);
  for (int64_t b = 0; b < p.batch(); ++b) {
    const AttentionProblem sp = p.sequence(b);
    if (sp.N_Q == 0 || sp.N_K == 0)
      continue; // nothing flows back
    const int64_t q0 = cu_q[static_cast<size_t>(b)], k0 = cu_k[static_cast<size_t>(b)];
    const AttentionTensors64 t{packed_sequence_tensor(in.q, s.q, q0, sp.N_Q, p.H, p.D),
                               packed_sequence_tensor(in.k, s.k, k0, sp.N_K, p.H_KV, p.D),
                               packed_sequence_tensor(in.v, s.v, k0, sp.N_K, p.H_KV, p.D),
                               packed_sequence_tensor(dout, s.q, q0, sp.N_Q, p.H, p.D)};
    const AttentionGrads seq = backward(b, sp, t); // [1, heads, n, D]
    // Scatters a sequence's [heads, n, D] gradient into the packed [total, heads, D] one at token `t0`.
    auto scatter = [&](const std::vector<double>& from, std::vector<double>& to, int64_t heads, int64_t n,
                       int64_t t0) {
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < n; ++i)
          for (int64_t d = 0; d < p.D; ++d)
            to[static_cast<size_t>(((t0 + i) * heads + h) * p.D + d)] =
                from[static_cast<size_t>((h * n + i) * p.D + d)];
    };
    scatter(seq.dq, g.dq, p.H, sp.N_Q, q0);
    scatter(seq.dq_magnitude, g.dq_magnitude, p.H, sp.N_Q, q0);
    scatter(seq.dk, g.dk, p.H_KV, sp.N_K, k0);
    scatter(seq.dk_magnitude, g.dk_magnitude, p.H_KV, sp.N_K, k0);
    scatter(seq.dv, g.dv, p.H_KV, sp.N_K, k0);
    scatter(seq.dv_magnitude, g.dv_magnitude, p.H_KV, sp.N_K, k0);
  }
  return g;
}

AttentionBwdBuffers make_varlen_bwd_buffers(const VarlenProblem& p, const AttentionInputs& in,
                                            const HostBuffer& dout) {
  return make_varlen_bwd_buffers(p, in, dout, varlen_reference(p, in));
}

AttentionBwdBuffers make_varlen_bwd_buffers(const VarlenProblem& p, const AttentionInputs& in,
                                            const HostBuffer& dout, const AttentionResult& fwd) {
  check_varlen_problem(p);
  const int64_t rows = p.H * p.total_q();
  AttentionBwdBuffers b{in.q,
                        in.k,
                        in.v,
                        HostBuffer(p.dtype, varlen_q_numel(p), "O"),
                        dout,
                        HostBuffer(DType::f32, rows, "LSE"),
                        HostBuffer(DType::f32, rows, "Delta"),
                        HostBuffer(p.dtype, varlen_q_numel(p), "dQ"),
                        HostBuffer(p.dtype, varlen_kv_numel(p), "dK"),
                        HostBuffer(p.dtype, varlen_kv_numel(p), "dV"),
                        HostBuffer(DType::f32, rows * p.D, "DQ_ACC")};
  // The forward's outputs as the forward kernel would leave them (O's padding NaN: never read).
  poison(b.o);
  const PackedStrides so = varlen_strides(p).o;
  for (int64_t t = 0; t < p.total_q(); ++t)
    for (int64_t h = 0; h < p.H; ++h)
      for (int64_t d = 0; d < p.D; ++d)
        b.o.set(t * so.token + h * so.head + d, fwd.o[static_cast<size_t>((t * p.H + h) * p.D + d)]);
  for (int64_t r = 0; r < rows; ++r)
    b.lse.set(r, fwd.lse[static_cast<size_t>(r)]);
  for (HostBuffer* out : {&b.delta, &b.dq, &b.dk, &b.dv, &b.dq_acc})
    poison(*out);
  return b;
}

AttentionGrads gather_varlen_grads(const VarlenProblem& p, const AttentionBwdBuffers& b) {
  const VarlenStrides s = varlen_strides(p);
  auto gather = [&](const HostBuffer& buf, const PackedStrides& st, int64_t total, int64_t heads) {
    std::vector<double> out;
    out.reserve(static_cast<size_t>(total * heads * p.D));
    for (int64_t t = 0; t < total; ++t)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t d = 0; d < p.D; ++d)
          out.push_back(buf.get(t * st.token + h * st.head + d));
    return out;
  };
  AttentionGrads g;
  g.dq = gather(b.dq, s.q, p.total_q(), p.H);
  g.dk = gather(b.dk, s.k, p.total_k(), p.H_KV);
  g.dv = gather(b.dv, s.k, p.total_k(), p.H_KV);
  return g;
}

AttentionBwdConfigs default_varlen_bwd_configs(const VarlenProblem& p, bool atomic_dq) {
  const AttentionBwdConfigs dense = default_bwd_configs(p.shape(), atomic_dq);
  return {varlen_config_of(fa2_bwd_dkdv_varlen_def(), dense.dkdv),
          varlen_config_of(fa2_bwd_dq_varlen_def(), dense.dq)};
}

void run_varlen_bwd(const VarlenProblem& p, const AttentionBwdConfigs& configs, AttentionBwdBuffers& b,
                    Executor executor) {
  run_varlen_bwd(p, configs, b, varlen_offsets(p), executor);
}

void run_varlen_bwd(const VarlenProblem& p, const AttentionBwdConfigs& configs, AttentionBwdBuffers& b,
                    const VarlenOffsets& offsets, Executor executor) {
  run_varlen_bwd(p, configs, b, offsets, executor, AttentionMods{}, {});
}

void run_varlen_bwd(const VarlenProblem& p, const AttentionBwdConfigs& configs, AttentionBwdBuffers& b,
                    const VarlenOffsets& offsets, Executor executor, const AttentionMods& mods,
                    const std::vector<InterpArg>& mod_args) {
  check_varlen_problem(p);
  const AttentionProblem shape = p.shape();
  check_attention_config(shape, configs.dkdv);
  check_attention_config(shape, configs.dq);
  const int64_t B = static_cast<int64_t>(offsets.cu_seqlens_q.size()) - 1;
  if (B <= 0)
    return;
  HostBuffer cu_q(DType::i32, B + 1, "CU_SEQLENS_Q"), cu_k(DType::i32, B + 1, "CU_SEQLENS_K");
  for (int64_t i = 0; i <= B; ++i) {
    cu_q.set_int(i, offsets.cu_seqlens_q[static_cast<size_t>(i)]);
    cu_k.set_int(i, offsets.cu_seqlens_k[static_cast<size_t>(i)]);
  }
  const VarlenStrides s = varlen_strides(p);
  std::vector<InterpArg> args;
  for (HostBuffer* t : {&b.q, &b.k, &b.v, &b.o, &b.dout, &b.lse, &b.delta, &b.dq, &b.dk, &b.dv, &b.dq_acc})
    args.push_back(InterpArg::ptr(*t));
  args.push_back(InterpArg::of_float(shape.scale()));
  for (int64_t v : {B, p.H, p.H_KV, p.total_q(), p.total_k(), p.D})
    args.push_back(InterpArg::of_int(v));
  // Q, K, V, O, dO, dQ, dK, dV: gradients share their input's layout; (batch: unused, head, sequence).
  for (const PackedStrides* t : {&s.q, &s.k, &s.v, &s.o, &s.q, &s.q, &s.k, &s.k})
    for (int64_t v : {int64_t{0}, t->head, t->token})
      args.push_back(InterpArg::of_int(v));
  args.push_back(InterpArg::ptr(cu_q));
  args.push_back(InterpArg::ptr(cu_k));
  SizeArgs sizes = varlen_size_args(p);
  sizes["B"] = B;
  sizes["MAX_SEQLEN_Q"] = offsets.max_seqlen_q;
  sizes["MAX_SEQLEN_K"] = offsets.max_seqlen_k;

  const bool atomic_dq = configs.dkdv.get("ATOMIC_DQ") != 0;
  const Config pre =
      varlen_config_of(fa2_bwd_preprocess_varlen_def(), bwd_preprocess_config(shape, configs.dkdv));
  // A kernel whose grid is empty has nothing to do: no query rows (preprocess, dQ: yet dK/dV still write
  // their zeros) or no keys (dK/dV: yet dQ still writes its zeros).
  std::vector<InterpArg> modded_args = args; // the looping kernels' arguments end in the mods' tensors
  modded_args.insert(modded_args.end(), mod_args.begin(), mod_args.end());
  auto run = [&](const KernelDef& def, const Config& c, const std::vector<InterpArg>& kernel_args) {
    def.check(c);
    const Grid grid = def.grid(c, sizes);
    if (grid[0] > 0 && grid[1] > 0)
      execute(executor, def.build(c), grid, kernel_args);
  };
  run(fa2_bwd_preprocess_varlen_def(), pre, args);
  run(fa2_bwd_dkdv_varlen_def(mods), configs.dkdv, modded_args);
  if (atomic_dq)
    run(fa2_bwd_dq_convert_varlen_def(),
        varlen_config_of(fa2_bwd_dq_convert_varlen_def(), bwd_dq_convert_config(shape)), args);
  else
    run(fa2_bwd_dq_varlen_def(mods), configs.dq, modded_args);
}

} // namespace kiln
