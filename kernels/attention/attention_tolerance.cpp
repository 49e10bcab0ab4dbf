#include "kernels/attention/attention_bwd_tolerance.h"

#include "kernels/compare.h"

#include <algorithm>
#include <cmath>

namespace kiln {

double attention_grad_tolerance(DType t, bool tf32, double max_abs_lse) {
  return 2 * tolerance(t, tf32) + 2 * unit_roundoff(DType::f32) * max_abs_lse;
}

double max_abs_lse(const AttentionProblem& p, const AttentionInputs& in) {
  double m = 0;
  for (double l : reference_forward(p, logical_tensors(p, in)).lse)
    if (std::isfinite(l))
      m = std::max(m, std::abs(l));
  return m;
}

} // namespace kiln
