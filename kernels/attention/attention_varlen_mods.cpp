#include "kernels/attention/attention_varlen_mods.h"

#include "kernels/attention/fa2_bwd_dkdv.h"
#include "kernels/attention/fa2_bwd_dq.h"
#include "kernels/attention/fa2_bwd_varlen.h"
#include "kernels/attention/fa2_fwd_varlen.h"

namespace kiln {

const KernelDef& fa2_fwd_varlen_def(const AttentionMods& mods) {
  return def_with_mods(fa2_fwd_varlen_def(), mods, build_fa2_fwd_varlen_with_mods, false);
}

const KernelDef& fa2_bwd_dkdv_varlen_def(const AttentionMods& mods) {
  return def_with_mods(fa2_bwd_dkdv_varlen_def(), mods, build_fa2_bwd_dkdv_with_mods, true);
}

const KernelDef& fa2_bwd_dq_varlen_def(const AttentionMods& mods) {
  return def_with_mods(fa2_bwd_dq_varlen_def(), mods, build_fa2_bwd_dq_with_mods, true);
}

SizeArgs varlen_mod_size_args(const VarlenSizes& s) {
  return {{"B", s.B}, {"H", s.H}, {"H_KV", s.H_KV}, {"N_Q", s.max_seqlen_q}, {"N_K", s.max_seqlen_k}};
}

SizeArgs varlen_mod_size_args(const VarlenProblem& p) { return varlen_mod_size_args(varlen_sizes(p)); }

std::vector<InterpArg> varlen_mod_interp_args(const VarlenProblem& p, const AttentionMods& mods,
                                              ModTensorValues& tensors) {
  return mod_interp_args(varlen_mod_size_args(p), mods, tensors);
}

AttentionResult varlen_reference_with_mods(const VarlenProblem& p, const AttentionInputs& in,
                                           const AttentionMods& mods, const ModTensorValues& tensors) {
  ModReferences ref(mods, tensors, varlen_mod_size_args(p));
  return varlen_reference(p, in, [&](int64_t b, const AttentionProblem& seq, const AttentionTensors64& t) {
    ref.set_lengths(seq.N_Q, seq.N_K);
    return reference_with_mods(seq, t, ref, b);
  });
}

AttentionGrads varlen_reference_backward_with_mods(const VarlenProblem& p, const AttentionInputs& in,
                                                   const HostBuffer& dout, const AttentionMods& mods,
                                                   const ModTensorValues& tensors) {
  ModReferences ref(mods, tensors, varlen_mod_size_args(p));
  return varlen_reference_backward(p, in, dout,
                                   [&](int64_t b, const AttentionProblem& seq, const AttentionTensors64& t) {
                                     ref.set_lengths(seq.N_Q, seq.N_K);
                                     return reference_backward_with_mods(seq, t, ref, b);
                                   });
}

AttentionResult run_fa2_varlen_with_mods(const VarlenProblem& p, const AttentionMods& mods,
                                         const ModTensorValues& tensors, const Config& config,
                                         const AttentionInputs& in, Executor executor) {
  check_varlen_problem(p);
  check_mod_tensors(mods, tensors, varlen_mod_size_args(p));
  ModTensorValues mod_inputs = tensors;
  return run_fa2_varlen_interpreted(p, config, in, varlen_offsets(p), executor, mods,
                                    varlen_mod_interp_args(p, mods, mod_inputs));
}

AttentionGrads run_varlen_bwd_with_mods(const VarlenProblem& p, const AttentionMods& mods,
                                        const ModTensorValues& tensors, const AttentionBwdConfigs& configs,
                                        const AttentionInputs& in, const HostBuffer& dout,
                                        Executor executor) {
  check_varlen_problem(p);
  check_mod_tensors(mods, tensors, varlen_mod_size_args(p));
  AttentionBwdBuffers buffers =
      make_varlen_bwd_buffers(p, in, dout, varlen_reference_with_mods(p, in, mods, tensors));
  ModTensorValues mod_inputs = tensors;
  run_varlen_bwd(p, configs, buffers, varlen_offsets(p), executor, mods,
                 varlen_mod_interp_args(p, mods, mod_inputs));
  return gather_varlen_grads(p, buffers);
}

} // namespace kiln
