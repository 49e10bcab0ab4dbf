#include "kernels/attention/attention_tolerance.h"

#include "kernels/compare.h"

#include <algorithm>
#include <cmath>

namespace kiln {

namespace {
// The relative rounding of a score: the dot's operands are rounded to tf32, or every other dtype's products
// are exact in the f32 accumulator, which rounds.
double score_roundoff(bool tf32) { return tf32 ? unit_roundoff(DType::f32, true) : unit_roundoff(DType::f32); }
} // namespace

double attention_tolerance(DType t, bool tf32, double max_abs_lse) {
  return tolerance(t, tf32) + score_roundoff(tf32) * max_abs_lse;
}

double attention_grad_tolerance(DType t, bool tf32, double max_abs_lse) {
  return 2 * tolerance(t, tf32) + 2 * score_roundoff(tf32) * max_abs_lse;
}

double max_abs_lse(const AttentionResult& reference) {
  double m = 0;
  for (double l : reference.lse)
    if (std::isfinite(l))
      m = std::max(m, std::abs(l));
  return m;
}

double max_abs_lse(const AttentionProblem& p, const AttentionInputs& in) {
  return max_abs_lse(reference_forward(p, logical_tensors(p, in)));
}

} // namespace kiln
