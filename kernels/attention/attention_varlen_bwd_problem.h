// Host-side attention backward over packed (variable-length) sequences (fa2_bwd_varlen.h): dO, the
// double-precision gradients (each sequence reference_backward's own dense problem), the kernels' buffers and
// arguments, configs, and a whole backward pass run in the interpreter or on the GPU.
#pragma once

#include "kernels/attention/attention_bwd_problem.h"
#include "kernels/attention/attention_varlen_problem.h"

namespace kiln {

// dO uniformly random in [-scale, scale], in Q's dtype and packed layout (padding NaN: never read).
HostBuffer make_varlen_dout(const VarlenProblem& p, uint64_t seed, double scale);

// Gradients in logical order: dQ [total_q, H, D], dK and dV [total_k, H_KV, D], with their magnitudes
// (attention_bwd_problem.h). Rows that see no key get dQ = 0, keys no row sees dK = dV = 0.
AttentionGrads varlen_reference_backward(const VarlenProblem& p, const AttentionInputs& in,
                                         const HostBuffer& dout);
// The same with each sequence's gradients from `backward(b, sequence(b), its logical tensors with dO)`,
// called for every sequence with rows and keys; it returns them as reference_backward does ([1, heads, n,
// D]).
using SequenceBackwardFn =
    std::function<AttentionGrads(int64_t b, const AttentionProblem& seq, const AttentionTensors64& t)>;
AttentionGrads varlen_reference_backward(const VarlenProblem& p, const AttentionInputs& in,
                                         const HostBuffer& dout, const SequenceBackwardFn& backward);

// The kernels' buffers: inputs and dO as given; O and LSE [H, total_q] from the double forward (rounded as
// the forward kernel would leave them); Delta [H, total_q], dQ, dK, dV and DQ_ACC [H, total_q, D] poisoned
// with NaN.
AttentionBwdBuffers make_varlen_bwd_buffers(const VarlenProblem& p, const AttentionInputs& in,
                                            const HostBuffer& dout);
// The same with O and LSE from `fwd` (logical order, as varlen_reference gives them).
AttentionBwdBuffers make_varlen_bwd_buffers(const VarlenProblem& p, const AttentionInputs& in,
                                            const HostBuffer& dout, const AttentionResult& fwd);
// dQ, dK, dV of the buffers in logical order.
AttentionGrads gather_varlen_grads(const VarlenProblem& p, const AttentionBwdBuffers& b);

// default_bwd_configs(p.shape(), atomic_dq) as the packed kernels' configs.
AttentionBwdConfigs default_varlen_bwd_configs(const VarlenProblem& p, bool atomic_dq = false);

// Runs the backward (preprocess, dK/dV, then dQ or — ATOMIC_DQ=1 — the dQ convert) on `b` with the offsets of
// `offsets` (varlen_offsets(p) for the problem's own). A kernel whose grid is empty is not launched: with no
// query rows dK/dV still runs (and writes zeros), with no keys dQ does.
void run_varlen_bwd(const VarlenProblem& p, const AttentionBwdConfigs& configs, AttentionBwdBuffers& b,
                    Executor executor = Executor::Interpreter);
void run_varlen_bwd(const VarlenProblem& p, const AttentionBwdConfigs& configs, AttentionBwdBuffers& b,
                    const VarlenOffsets& offsets, Executor executor = Executor::Interpreter);
// The same with mods: dK/dV and dQ are fa2_bwd_dkdv_varlen_def(mods) and fa2_bwd_dq_varlen_def(mods), whose
// arguments end in `mod_args` (attention_varlen_mods.h's varlen_mod_interp_args); the preprocess and the dQ
// convert do not depend on the mods.
void run_varlen_bwd(const VarlenProblem& p, const AttentionBwdConfigs& configs, AttentionBwdBuffers& b,
                    const VarlenOffsets& offsets, Executor executor, const AttentionMods& mods,
                    const std::vector<InterpArg>& mod_args);

} // namespace kiln
