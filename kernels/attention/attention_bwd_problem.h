// Host-side attention backward problems: the double-precision gradients (analytic, and the forward in
// double that central finite differences check them against), the backward kernels' buffers and arguments,
// configs that match a problem, and a whole backward pass (preprocess, dK/dV, dQ or the atomic dQ and its
// convert) run in the interpreter or on the GPU.
#pragma once

#include "kernels/attention/attention_mods.h"
#include "kernels/attention/attention_problem.h"
#include "kernels/compare.h"

#include <array>
#include <vector>

namespace kiln {

// dO uniformly random in [-scale, scale], rounded to the problem's dtype, in Q's layout.
HostBuffer make_dout(const AttentionProblem& p, uint64_t seed, double scale);
// Q, K, V of `in` and dO (Q's dtype and layout) in double and logical order.
AttentionTensors64 logical_bwd_tensors(const AttentionProblem& p, const AttentionInputs& in, const HostBuffer& dout);

// Gradients in logical order: dQ [B, H, N_Q, D], dK and dV [B, H_KV, N_K, D].
struct AttentionGrads {
  std::vector<double> dq, dk, dv;
  // reference_backward only: the same sums over the terms' absolute values (|dS| bounded by
  // P ∘ (|dO| |V|ᵀ + rowsum(P ∘ |dO| |V|ᵀ))), the scale of the rounding errors of any finite-precision
  // computation of the gradients; compare_to_reference(out, ref, magnitude) measures errors against it where
  // the terms cancel.
  std::vector<double> dq_magnitude, dk_magnitude, dv_magnitude;
};
// The analytic gradients of Σ O ∘ dO in double: P = softmax(S), dV = Pᵀ dO, dP = dO Vᵀ,
// dS = P ∘ (dP − rowsum(P ∘ dP)), dQ = scale · dS K, dK = scale · dSᵀ Q; GQA sums over each kv head's group.
// A row with no visible key contributes nothing.
AttentionGrads reference_backward(const AttentionProblem& p, const AttentionTensors64& t);
// The same through score and mask mods (attention_mods_host.h builds these from the mods' references): each score
// of a key the CAUSAL rule lets through is score(b, h, i, j, q·k · scale) (−inf: hidden), dS is multiplied by
// derivative(...) (d score / d (q·k · scale)), and P = exp(score − lse[row]) with the forward's LSE (sinks
// merged into it: a sink has no value, so it changes the gradients only through LSE).
struct ReferenceBackwardScores {
  ReferenceScoreFn score, derivative;
  std::vector<double> lse; // [B, H, N_Q]
};
AttentionGrads reference_backward(const AttentionProblem& p, const AttentionTensors64& t,
                                  const ReferenceBackwardScores& scores);

// dQ, dK and dV of `out` against `ref` (reference_backward's), each measured against the reference's magnitude
// where its terms cancel (compare_to_reference with a magnitude).
struct GradComparison {
  const char* name; // "dQ", "dK", "dV"
  Comparison result;
};
std::array<GradComparison, 3> compare_grads(const AttentionGrads& out, const AttentionGrads& ref);

// Every buffer the backward kernels read or write, in the problem's dtype and layout (dK, dV in K's layout),
// LSE and Delta f32 [B, H, N_Q], DQ_ACC f32 [B, H, N_Q, D].
struct AttentionBwdBuffers {
  HostBuffer q, k, v, o, dout, lse, delta, dq, dk, dv, dq_acc;
};
// Inputs, dO and the forward's O and LSE (from reference_forward, rounded to the buffers' dtypes); outputs
// and scratch poisoned with NaN.
AttentionBwdBuffers make_bwd_buffers(const AttentionProblem& p, const AttentionInputs& in, const HostBuffer& dout);
// O and LSE of `fwd` (logical order, as reference_forward or gather_outputs give them) written into `b`:
// O rounded to the dtype in the problem's layout, LSE to f32.
void set_forward_outputs(const AttentionProblem& p, const AttentionResult& fwd, AttentionBwdBuffers& b);
// Interpreter arguments in the backward kernels' order (attention_bwd_args.h). Buffers are referenced.
std::vector<InterpArg> fa2_bwd_interp_args(const AttentionProblem& p, AttentionBwdBuffers& b);
// dQ, dK, dV of the buffers in logical order.
AttentionGrads gather_grads(const AttentionProblem& p, const AttentionBwdBuffers& b);

// The two looping kernels' configs for `p`: problem-bound params applied (HEAD_DIM, EVEN_D, CAUSAL, ...),
// GPU-sized tiles. `atomic_dq` selects the non-deterministic variant (ATOMIC_DQ=1 in dK/dV).
struct AttentionBwdConfigs {
  Config dkdv, dq;
};
AttentionBwdConfigs default_bwd_configs(const AttentionProblem& p, bool atomic_dq = false);
// The spaces the autotuner searches for dK/dV and dQ, with `p`'s problem-bound params applied (dK/dV's without
// the warp-specialised tile where it cannot serve `p`: H != H_KV, or atomic_dq).
std::vector<Config> bwd_dkdv_config_space(const AttentionProblem& p, bool atomic_dq = false);
std::vector<Config> bwd_dq_config_space(const AttentionProblem& p);
// The preprocess / dQ-convert configs that go with `dkdv` (same problem params and ATOMIC_DQ).
Config bwd_preprocess_config(const AttentionProblem& p, const Config& dkdv);
Config bwd_dq_convert_config(const AttentionProblem& p);

// Runs the whole backward (preprocess, then dK/dV, then dQ — or, when configs.dkdv has ATOMIC_DQ=1, the dQ
// convert) on `b` as `executor` says; the buffers hold the results afterwards.
void run_bwd(const AttentionProblem& p, const AttentionBwdConfigs& configs, AttentionBwdBuffers& b,
             Executor executor = Executor::Interpreter);
// The same with mods: dK/dV and dQ are fa2_bwd_dkdv_def(mods) and fa2_bwd_dq_def(mods), whose arguments end in
// `mod_args` (the mods' tensors and strides, attention_mods_host.h's mod_interp_args); the preprocess and the
// dQ convert do not depend on the mods.
void run_bwd(const AttentionProblem& p, const AttentionBwdConfigs& configs, AttentionBwdBuffers& b,
             Executor executor, const AttentionMods& mods, const std::vector<InterpArg>& mod_args);
// The same with the looping kernels given: dK/dV's and dQ's defs, and the arguments each takes after the
// backward's own (the mods' tensors; over a block mask, then its lists: attention_block_mask_host.h). No
// atomic dQ (configs.dkdv's ATOMIC_DQ must be 0: a kiln::Error otherwise).
struct BwdLoopKernels {
  const KernelDef* dkdv = nullptr;
  const KernelDef* dq = nullptr;
  std::vector<InterpArg> dkdv_args, dq_args;
};
void run_bwd(const AttentionProblem& p, const AttentionBwdConfigs& configs, AttentionBwdBuffers& b,
             Executor executor, const BwdLoopKernels& kernels);

} // namespace kiln
