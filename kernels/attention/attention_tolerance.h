// How close attention's outputs must come to the double-precision reference: the tolerances the interpreter
// and GPU tests hold O and LSE (forward) and dQ, dK, dV (backward) to, and that `kiln attention --check` and
// the bench report against.
#pragma once

#include "kernels/attention/attention_problem.h"

namespace kiln {

// The relative L2 error O and LSE may show. Beyond the dtype's rounding of the inputs and of O
// (tolerance(t, tf32)), a score s carries an absolute rounding error of about |s| · u, where u is the dot's
// operand precision (tf32: 2^-11) or the f32 accumulation's (every other dtype), and P = exp(s − max) turns
// it into a relative error of P: it grows with the size of the scores, which max |LSE| bounds (inputs of ±30
// give |LSE| in the thousands, where tf32 products are good to a few per cent).
double attention_tolerance(DType t, bool tf32, double max_abs_lse);

// The relative L2 error a gradient may show. Beyond the forward's roundings, dV's product reads P rounded
// to the input dtype and dK, dQ read dS rounded to it, where dS = P ∘ (dP − Delta) and Delta carries O's
// rounding: twice the forward's tolerance. And P = exp(S − LSE) is recomputed from an f32 LSE, whose
// rounding (|LSE| · u_f32), and the scores' own (tf32: |LSE| · 2^-11), are absolute errors in the exponent
// that, unlike in the forward, no normalisation cancels: they grow with the size of the scores. Gradients are
// compared with compare_to_reference(out, ref, magnitude) (kernels/compare.h), since their terms cancel.
double attention_grad_tolerance(DType t, bool tf32, double max_abs_lse);

// The largest finite |LSE| of the forward on `in` (the double reference's), for the tolerances above.
double max_abs_lse(const AttentionProblem& p, const AttentionInputs& in);
// The largest finite |LSE| of a reference result already computed.
double max_abs_lse(const AttentionResult& reference);

} // namespace kiln
