// The mods' double-precision references at points of the score matrix (what reference_with_mods and
// reference_backward_with_mods apply, attention_mods_host.h), open to callers that run them on a part of a
// problem: a packed batch's sequences (attention_varlen_mods.h), each a dense problem of one batch whose mods
// see the sequence's index and lengths, and whose tensors' dims run along the padded batch's sizes.
#pragma once

#include "kernels/attention/attention_mods_host.h"

namespace kiln {

// check_mod_tensors against the sizes the tensors' dims run along (B, H, H_KV, N_Q, N_K) rather than a
// problem's.
void check_mod_tensors(const AttentionMods& mods, const ModTensorValues& tensors, const SizeArgs& sizes);

// mod_interp_args against those sizes.
std::vector<InterpArg> mod_interp_args(const SizeArgs& sizes, const AttentionMods& mods,
                                       ModTensorValues& tensors);

// The mods' references at one point, through the tensors' strides. `tensor_sizes` are the sizes the tensors'
// dims run along (checked by check_mod_tensors); the mods see N_Q and N_K from them until set_lengths() gives
// a packed sequence's own. A mod without a reference is a kiln::Error. Keeps state between calls: one thread
// at a time.
class ModReferences {
public:
  ModReferences(const AttentionProblem& p, const AttentionMods& mods, const ModTensorValues& tensors);
  ModReferences(const AttentionMods& mods, const ModTensorValues& tensors, const SizeArgs& tensor_sizes);
  ModReferences(const ModReferences&) = delete;

  void set_lengths(int64_t n_q, int64_t n_k);
  // The final score of the scaled q·k `s` at (b, h, i, j): the score mods in order, −inf where a mask mod
  // hides the key.
  double score(int64_t b, int64_t h, int64_t i, int64_t j, double s);
  // d score / d s through the score mods: a central difference of their references.
  double score_derivative(int64_t b, int64_t h, int64_t i, int64_t j, double s);
  // The sink logit of row i of (b, h); −inf without a sink.
  double sink(int64_t b, int64_t h, int64_t i);

private:
  double score_mods(int64_t b, int64_t h, int64_t i, int64_t j, double s);

  const AttentionMods& mods_;
  const ModTensorValues& tensors_;
  std::map<std::string, std::vector<int64_t>> strides_;
  ModPoint pt_;
};

// reference_with_mods on logical tensors through `ref`, the mods seeing batch first_b + b (a packed
// sequence's index); N_K may be 0 (every row then sees only the sink, if any).
AttentionResult reference_with_mods(const AttentionProblem& p, const AttentionTensors64& t,
                                    ModReferences& ref, int64_t first_b = 0);

// reference_backward_with_mods on logical tensors (with dO) through `ref`, the mods seeing batch
// first_b + b; N_K > 0.
AttentionGrads reference_backward_with_mods(const AttentionProblem& p, const AttentionTensors64& t,
                                            ModReferences& ref, int64_t first_b = 0);

} // namespace kiln
