// A double-precision attention backward reference for a sample of gradient elements, for problems too
// large for kernels/attention's reference_backward (B·H·N_Q·N_K·D multiply-adds, twice). The sample lives
// in a few (batch, kv head) pairs: for each, every query row of the kv head's group gets its softmax
// statistics (LSE and Delta = Σ_j P_ij dP_ij) recomputed in double — that pass costs 2·N_Q·N_K·D
// multiply-adds per query head and is what bounds the check — and then
//   dQ of sampled query rows (the first and last row of each query head, a causal mask's extremes, and
//   random ones): scale · Σ_j P_ij (dP_ij − Delta_i) K_j;
//   dK and dV of sampled keys (the first and last key and random ones), over every query row of the group:
//   dV_j = Σ_i P_ij dO_i, dK_j = scale · Σ_i P_ij (dP_ij − Delta_i) Q_i.
// Nothing comes from the kernels under test: O, LSE and Delta are recomputed from the rounded inputs.
#pragma once

#include "kernels/attention/attention_problem.h"

#include <cstdint>
#include <vector>

namespace kiln::bench {

struct BwdSample {
  struct Row {
    int64_t b = 0, h = 0, i = 0; // a query row of head h
  };
  struct Key {
    int64_t b = 0, hk = 0, j = 0; // a key of kv head hk
  };
  std::vector<Row> rows; // dQ rows, grouped by (b, kv head of h)
  std::vector<Key> keys; // dK and dV rows, grouped by (b, hk)
};

// `kv_heads` (b, hk) pairs (fewer when the problem has fewer), in each about `rows_per_head` query rows of
// every query head of the group and `keys_per_head` keys; deterministic in `seed`.
BwdSample sample_bwd(const AttentionProblem& p, int64_t kv_heads, int64_t rows_per_head, int64_t keys_per_head,
                     uint64_t seed);

// dQ [rows, D], dK and dV [keys, D] of the sample, and the largest finite |LSE| met (for the tolerance).
struct SampledGrads {
  std::vector<double> dq, dk, dv;
  double max_abs_lse = 0;
};
// In double from the rounded inputs and dO (Q's dtype and layout); the work is spread over the CPU's threads.
SampledGrads sampled_reference_backward(const AttentionProblem& p, const AttentionInputs& in,
                                        const HostBuffer& dout, const BwdSample& s);
// The same elements of a kernel's gradients (dQ in Q's layout, dK and dV in K's).
SampledGrads gather_sampled_grads(const AttentionProblem& p, const HostBuffer& dq, const HostBuffer& dk,
                                  const HostBuffer& dv, const BwdSample& s);

// The multiply-adds sampled_reference_backward costs (its row-statistics pass), for budgeting.
double sampled_backward_macs(const AttentionProblem& p, int64_t kv_heads);

} // namespace kiln::bench
