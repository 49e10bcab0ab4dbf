// The host side of attention mods (attention_mods.h): the mods' tensors on the host, the checks a tensor
// passed for a ModTensorSpec must pass, the double-precision references (forward and gradients) with the mods
// applied to the full score matrix, and interpreted (or GPU, through the executor) runs of the FA2 forward
// and backward with mods.
#pragma once

#include "kernels/attention/attention_bwd_problem.h"
#include "kernels/attention/attention_mods.h"
#include "kernels/attention/attention_problem.h"

#include <llvm/ADT/ArrayRef.h>

#include <map>
#include <string>
#include <vector>

namespace kiln {

// `def` for the mods: named "<name>[<identity>]" (AttentionMods::identity), built by `build` with them; `def`
// itself for empty mods. One per kernel and distinct mods (AttentionMods::identity_key()), built on first use
// and kept for the process's life. `differentiated`: the kernel multiplies dS by the score mods' derivatives,
// so a mod the builder cannot differentiate is a kiln::Error here (AttentionMods::check_differentiable).
// `prune`, where given, replaces def's prune with one that sees the mods (fa2_fwd_prune). fa2_fwd_def(mods),
// fa2_bwd_dkdv_def(mods) and fa2_bwd_dq_def(mods) are this.
using PruneWithMods = std::string (*)(const Config&, const SizeArgs&, const AttentionMods&);
const KernelDef& def_with_mods(const KernelDef& def, const AttentionMods& mods,
                               Kernel (*build)(const Config&, const AttentionMods&), bool differentiated,
                               PruneWithMods prune = nullptr);

// A mod's tensor on the host: its elements and how they are laid out (strides in elements).
struct ModTensorData {
  HostBuffer data;
  std::vector<int64_t> shape, strides;
};
using ModTensorValues = std::map<std::string, ModTensorData>; // by ModTensorSpec::tensor_name()

// A dense (row-major) tensor of `shape`, zero-filled.
ModTensorData contiguous_mod_tensor(DType dtype, std::vector<int64_t> shape, const std::string& name);

// The strides the kernel receives for a tensor of `shape` and `strides` passed for `spec`: the caller's, with
// 0 along a dim of extent 1 (broadcast). A kiln::Error naming the tensor when its rank is not the spec's, a
// dim is neither the size it runs along (from `sizes`: B, H, H_KV, N_Q, N_K) nor 1, or a stride is negative.
std::vector<int64_t> mod_tensor_strides(const ModTensorSpec& spec, llvm::ArrayRef<int64_t> shape,
                                        llvm::ArrayRef<int64_t> strides, const SizeArgs& sizes);

// Every tensor the mods declare is in `tensors`, with the declared dtype, a shape and strides that
// mod_tensor_strides accepts, and elements enough for them; no other tensor is. A kiln::Error otherwise.
void check_mod_tensors(const AttentionMods& mods, const ModTensorValues& tensors, const AttentionProblem& p);

// softmax(mods(Q Kᵀ · scale)) V and the logsumexp in double, through each mod's reference (a mod without one
// is a kiln::Error): rows that see no key get O = 0, LSE = −inf, as reference() gives them.
AttentionResult reference_with_mods(const AttentionProblem& p, const AttentionInputs& in,
                                    const AttentionMods& mods, const ModTensorValues& tensors);

// The final score of one point, for references that visit only part of the score matrix (the bench's
// sampled rows): score(b, h, i, j, s) applies the score mods to the scaled q·k `s` and gives −inf where a mask
// mod hides key j from row i (the CAUSAL mode is not applied: the caller's rule). Sinks are not supported (a
// kiln::Error). The function refers to `mods` and `tensors`, which must outlive it, and keeps state between
// calls: call it from one thread at a time.
ReferenceScoreFn mod_score_reference(const AttentionProblem& p, const AttentionMods& mods,
                                     const ModTensorValues& tensors);

// The analytic gradients of Σ O ∘ dO in double with the mods (reference_backward through the mods'
// references): dS multiplied by d score_mods / d score, a central difference of the score mods' references;
// sinks enter through the forward's LSE. The sink logits' own gradient is reference_sink_gradient's.
AttentionGrads reference_backward_with_mods(const AttentionProblem& p, const AttentionInputs& in,
                                            const HostBuffer& dout, const AttentionMods& mods,
                                            const ModTensorValues& tensors);

// d loss / d sink of every row in double, [B, H, N_Q] in logical order: −exp(sink − LSE) · Σ_d dO ∘ O with the
// forward's O and LSE of reference_with_mods; 0 where the sink is −inf, and everywhere without a sink.
std::vector<double> reference_sink_gradient(const AttentionProblem& p, const AttentionInputs& in,
                                            const HostBuffer& dout, const AttentionMods& mods,
                                            const ModTensorValues& tensors);

// The sink's gradient as the backward computes it (fa2_bwd_preprocess, then fa2_bwd_sink_def(mods)), on the O
// and LSE of reference_with_mods rounded as the forward stores them: per row, [B, H, N_Q] in logical order,
// or with `per_head` the [H] sums.
std::vector<double> run_bwd_sink_gradient(const AttentionProblem& p, const AttentionMods& mods,
                                          const ModTensorValues& tensors, const AttentionInputs& in,
                                          const HostBuffer& dout, bool per_head,
                                          Executor executor = Executor::Interpreter);

// The mods' tensors as kernel arguments, in AttentionMods::tensors() order: each tensor's pointer, then its
// strides (mod_tensor_strides). The buffers are referenced, not copied.
std::vector<InterpArg> mod_interp_args(const AttentionProblem& p, const AttentionMods& mods,
                                       ModTensorValues& tensors);

// The FA2 forward with mods on `config` (which must agree with `p`), in the interpreter or on the GPU, on
// outputs poisoned with NaN; O and LSE in logical order.
AttentionResult run_fa2_with_mods(const AttentionProblem& p, const AttentionMods& mods,
                                  const ModTensorValues& tensors, const Config& config,
                                  const AttentionInputs& in, Executor executor = Executor::Interpreter);

// The whole backward with mods on `configs` (which must agree with `p`): O and LSE from reference_with_mods
// (as the forward with the mods leaves them), then run_bwd with the mods; dQ, dK, dV in logical order.
AttentionGrads run_bwd_with_mods(const AttentionProblem& p, const AttentionMods& mods,
                                 const ModTensorValues& tensors, const AttentionBwdConfigs& configs,
                                 const AttentionInputs& in, const HostBuffer& dout,
                                 Executor executor = Executor::Interpreter);

} // namespace kiln
