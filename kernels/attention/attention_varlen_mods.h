// Attention mods (attention_mods.h) over packed variable-length batches (fa2_fwd_varlen.h, fa2_bwd_varlen.h):
// the host side. Each sequence is its own attention problem and the mods apply to it as to one batch of the
// dense kernel, as a FlexAttention user of per-sequence positions expects:
//  - b is the sequence's index (0 .. B - 1), h the query head;
//  - q_idx and kv_idx are positions within the sequence (0 .. N_Q_b - 1, 0 .. N_K_b - 1), not packed rows;
//  - N_Q and N_K are the sequence's lengths, so that the mods' key bounds (causal, windows, prefix-LM) align
//    per sequence.
// A mod's tensor is therefore indexed per sequence, and sized as the padded batch: its dims B, H, H_KV, N_Q,
// N_K have extents B (the sequences), H, H_KV, MAX_SEQLEN_Q and MAX_SEQLEN_K (or 1, broadcast): a bias is
// [B, H, MAX_SEQLEN_Q, MAX_SEQLEN_K], document ids [B, MAX_SEQLEN_Q], ALiBi slopes and sinks [H]. Entries
// past a sequence's own lengths are never read.
#pragma once

#include "kernels/attention/attention_mod_references.h"
#include "kernels/attention/attention_varlen_bwd_problem.h"

namespace kiln {

// The sizes a mod tensor's dims run along in a packed batch: B (sequences), H, H_KV, N_Q = MAX_SEQLEN_Q,
// N_K = MAX_SEQLEN_K (what check_mod_tensors and mod_tensor_strides take).
SizeArgs varlen_mod_size_args(const VarlenSizes& s);
SizeArgs varlen_mod_size_args(const VarlenProblem& p);

// The mods' tensors as kernel arguments (pointer, then strides), against the packed batch's sizes.
std::vector<InterpArg> varlen_mod_interp_args(const VarlenProblem& p, const AttentionMods& mods,
                                              ModTensorValues& tensors);

// varlen_reference with the mods applied to each sequence (reference_with_mods of sequence b, the mods
// seeing batch b and the sequence's lengths): sinks included, so that a sequence without keys gives its rows
// O = 0 and LSE = the sink.
AttentionResult varlen_reference_with_mods(const VarlenProblem& p, const AttentionInputs& in,
                                           const AttentionMods& mods, const ModTensorValues& tensors);

// varlen_reference_backward with the mods (reference_backward_with_mods of each sequence).
AttentionGrads varlen_reference_backward_with_mods(const VarlenProblem& p, const AttentionInputs& in,
                                                   const HostBuffer& dout, const AttentionMods& mods,
                                                   const ModTensorValues& tensors);

// fa2_fwd_varlen_def(mods) on `config`, in the interpreter or on the GPU; O and LSE in logical order.
AttentionResult run_fa2_varlen_with_mods(const VarlenProblem& p, const AttentionMods& mods,
                                         const ModTensorValues& tensors, const Config& config,
                                         const AttentionInputs& in,
                                         Executor executor = Executor::Interpreter);

// The whole packed backward with mods: O and LSE from varlen_reference_with_mods (as the forward with the
// mods leaves them), then run_varlen_bwd with the mods; dQ, dK, dV in logical order.
AttentionGrads run_varlen_bwd_with_mods(const VarlenProblem& p, const AttentionMods& mods,
                                        const ModTensorValues& tensors, const AttentionBwdConfigs& configs,
                                        const AttentionInputs& in, const HostBuffer& dout,
                                        Executor executor = Executor::Interpreter);

} // namespace kiln
