// A double-precision attention reference for a sample of query rows, for problems too large for the
// full reference (kernels/attention's reference() costs B·H·N_Q·N_K·D multiply-adds). Rows are drawn from
// a few (batch, head) pairs so that each pair's K and V are converted to double once; the first and the
// last query row of each pair are always in the sample (a causal mask's extremes).
#pragma once

#include "kernels/attention/attention_problem.h"

#include <cstdint>
#include <vector>

namespace kiln::bench {

struct QueryRow {
  int64_t b = 0, h = 0, i = 0;
};

// About `count` distinct rows (fewer when the problem has fewer), grouped by (b, h), deterministic in `seed`.
std::vector<QueryRow> sample_query_rows(const AttentionProblem& p, int64_t count, uint64_t seed);

// O [rows, D] and LSE [rows] of the sampled rows in double precision from the (rounded) inputs, with the
// kernels' masking rule; a row that sees no key gets O = 0 and LSE = −inf, as reference() does. `score`, when
// given, maps each visible scaled q·k to its final score (−inf hides the key): attention mods, through
// mod_score_reference. It is called from one thread (the rows of different heads are then computed in turn,
// not in parallel).
AttentionResult sampled_reference(const AttentionProblem& p, const AttentionInputs& in,
                                  const std::vector<QueryRow>& rows, const ReferenceScoreFn& score = {});

// The same rows of a kernel's outputs (O in the problem's dtype and layout, LSE f32 [B, H, N_Q]).
AttentionResult gather_rows(const AttentionProblem& p, const HostBuffer& o, const HostBuffer& lse,
                            const std::vector<QueryRow>& rows);

} // namespace kiln::bench
