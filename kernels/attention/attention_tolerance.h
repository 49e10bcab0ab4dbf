// How close the attention backward's gradients must come to the double-precision ones (reference_backward):
// the tolerance the interpreter and GPU tests hold dQ, dK, dV to, and that `kiln attention --backward
// --check` reports against.
#pragma once

#include "kernels/attention/attention_problem.h"

namespace kiln {

// The relative L2 error a gradient may show. Beyond the forward's roundings, dV's product reads P rounded
// to the input dtype and dK, dQ read dS rounded to it, where dS = P ∘ (dP − Delta) and Delta carries O's
// rounding: twice the forward's tolerance. And P = exp(S − LSE) is recomputed from an f32 LSE, whose
// rounding (|LSE| · u_f32) is an absolute error in the exponent that, unlike in the forward, no
// normalisation cancels: it grows with the size of the scores (inputs of ±30 give |LSE| in the thousands).
double attention_grad_tolerance(DType t, bool tf32, double max_abs_lse);

// The largest finite |LSE| of the forward on `in` (the double reference's), for attention_grad_tolerance.
double max_abs_lse(const AttentionProblem& p, const AttentionInputs& in);

} // namespace kiln
