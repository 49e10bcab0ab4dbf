// Host-side packed (variable-length) attention problems, as fa2_fwd_varlen runs them (fa2_fwd_varlen.h): the
// sequences' lengths, the packed tensors and their offsets, the double-precision reference (each sequence its
// own dense problem), configs, and interpreted runs. Tests, the command line and the GPU checks describe
// varlen attention through VarlenProblem.
#pragma once

#include "kernels/attention/attention_problem.h"

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kiln {

struct AttentionMods;

struct VarlenProblem {
  std::vector<int64_t> seqlens_q, seqlens_k; // one entry per sequence, 0 allowed
  int64_t H = 1, H_KV = 1, D = 64;
  DType dtype = DType::f16;
  int causal = 0;           // 0 none, 1 top-left, 2 bottom-right, per sequence
  double sm_scale = 0;      // 0 → 1 / sqrt(D)
  bool k_transposed = true; // K_TRANSPOSED
  bool tf32 = false;
  bool exact_masked_v = false;
  // Extra elements after each token's heads in Q, K, V, O (a multiple of 8), so that the token stride is not
  // heads · D: the kernels must follow the strides.
  int64_t token_pad = 0;

  int64_t batch() const { return static_cast<int64_t>(seqlens_q.size()); }
  int64_t total_q() const;
  int64_t total_k() const;
  int64_t max_seqlen_q() const;
  int64_t max_seqlen_k() const;
  std::vector<int32_t> cu_seqlens_q() const; // B + 1 offsets from 0
  std::vector<int32_t> cu_seqlens_k() const;
  // The dense problem a config must agree with (HEAD_DIM, EVEN_D, CAUSAL, DTYPE, ...): B sequences of the
  // longest lengths (at least 1).
  AttentionProblem shape() const;
  // Sequence b as a dense problem of one batch (its lengths may be 0).
  AttentionProblem sequence(int64_t b) const;
  // The forward's FLOPs by the convention (attention_flops of each sequence, summed).
  double flops() const;
  std::string str() const; // "varlen q[3,0,17] k[5,0,20] H4 H_KV2 D32 f16 causal=2 ..."
};

// A problem the kernel cannot run is a kiln::Error naming the field: as check_attention_problem for H, H_KV,
// D, dtype and causal, plus lengths that are negative or differ in count, totals of kMaxAttentionSize or
// more, B · H past the grid.
void check_varlen_problem(const VarlenProblem& p);

// Strides in elements of the packed tensors: Q, O [total_q, H, D]; K, V [total_k, H_KV, D].
struct PackedStrides {
  int64_t token = 0, head = 0;
};
struct VarlenStrides {
  PackedStrides q, k, v, o;
};
VarlenStrides varlen_strides(const VarlenProblem& p);
int64_t varlen_q_numel(const VarlenProblem& p);  // elements of Q (and O) with the padding
int64_t varlen_kv_numel(const VarlenProblem& p); // of K and V

// Q, K, V uniformly random in [-scale, scale], rounded to the dtype (padding elements NaN: never read).
AttentionInputs make_varlen_inputs(const VarlenProblem& p, uint64_t seed, double scale);

// Rows [row0, row0 + n) of a packed tensor with strides `s` as a dense [1, heads, n, D] tensor in logical
// order (what reference_forward and reference_backward read).
std::vector<double> packed_sequence_tensor(const HostBuffer& buf, const PackedStrides& s, int64_t row0,
                                           int64_t n, int64_t heads, int64_t D);

// Results in logical order: O [total_q, H, D] and LSE [H, total_q] (FlashAttention's varlen layout).
// Each sequence is reference_forward() of sequence(b); a sequence with rows but no keys gets O = 0 and
// LSE = −inf.
AttentionResult varlen_reference(const VarlenProblem& p, const AttentionInputs& in);
// The same with each sequence's result from `forward(b, sequence(b), its logical tensors)`, called for every
// sequence with rows (N_K may be 0: K and V then empty); it returns [1, H, N_Q, D] and [1, H, N_Q] (the mods'
// reference, attention_varlen_mods.h).
using SequenceForwardFn =
    std::function<AttentionResult(int64_t b, const AttentionProblem& seq, const AttentionTensors64& t)>;
AttentionResult varlen_reference(const VarlenProblem& p, const AttentionInputs& in,
                                 const SequenceForwardFn& forward);

// The sizes fa2_fwd_varlen's grid and tuning key read (fa2_fwd_varlen.h), known without the lengths.
struct VarlenSizes {
  int64_t B = 0, H = 1, H_KV = 1, total_q = 0, total_k = 0, D = 64, max_seqlen_q = 0, max_seqlen_k = 0;
};
VarlenSizes varlen_sizes(const VarlenProblem& p);
SizeArgs varlen_size_args(const VarlenSizes& s);
SizeArgs varlen_size_args(const VarlenProblem& p);
// fa2_fwd_varlen's default config for `p` (default_fa2_config's tiles, VARLEN=1).
Config default_fa2_varlen_config(const VarlenProblem& p);

// O (dtype, padded like Q) and LSE f32 [H, total_q], poisoned with NaN.
AttentionOutputs make_varlen_outputs(const VarlenProblem& p);
// O and LSE of the outputs in logical order (see varlen_reference).
AttentionResult gather_varlen_outputs(const VarlenProblem& p, const AttentionOutputs& out);

// The offsets and longest lengths a launch is given: the problem's own, or others a test chooses (offsets
// that disagree with the tensors, to check that the kernel stays inside them).
struct VarlenOffsets {
  std::vector<int32_t> cu_seqlens_q, cu_seqlens_k;
  int64_t max_seqlen_q = 0, max_seqlen_k = 0;
};
VarlenOffsets varlen_offsets(const VarlenProblem& p);

// Runs fa2_fwd_varlen on outputs poisoned with NaN and returns them in logical order. An empty problem (no
// sequence, or no query row) launches nothing.
AttentionResult run_fa2_varlen_interpreted(const VarlenProblem& p, const Config& config,
                                           const AttentionInputs& in,
                                           Executor executor = Executor::Interpreter);
AttentionResult run_fa2_varlen_interpreted(const VarlenProblem& p, const Config& config,
                                           const AttentionInputs& in, const VarlenOffsets& offsets,
                                           Executor executor = Executor::Interpreter);
// The same with mods: fa2_fwd_varlen_def(mods), whose arguments end in `mod_args` (the mods' tensors and
// strides, attention_varlen_mods.h's varlen_mod_interp_args).
AttentionResult run_fa2_varlen_interpreted(const VarlenProblem& p, const Config& config,
                                           const AttentionInputs& in, const VarlenOffsets& offsets,
                                           Executor executor, const AttentionMods& mods,
                                           const std::vector<InterpArg>& mod_args);

} // namespace kiln
