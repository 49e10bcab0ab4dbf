// The gradient of attention-sink logits (fa2_bwd_sink.h), shared by the interpreter
// (attention_sink_grad_test.cpp) and GPU (gpu/attention_sink_grad_gpu_test.cpp) tests: cases with sinks
// (rows that see no key, a −inf sink, GQA, B = 2, windows and softcapping), and the check every case runs:
// the per-row gradient and the per-head sums against the double-precision closed form.
#pragma once

#include "interp/attention_mods_bwd_cases.h"
#include "kernels/attention/attention_tolerance.h"

#include <cmath>

namespace kiln::testing_support {

inline std::vector<ModCase> sink_grad_cases() {
  std::vector<ModCase> cs;
  for (const ModCase& c : mod_bwd_cases())
    if (!c.mods.sink.empty())
      cs.push_back(c);
  {
    // f32, B = 2, a causal sliding window on the built-in top-left causal path: rows near the start see few
    // keys, so the sink's share of the softmax varies widely from row to row.
    AttentionCase base = make_case(90, 70, 32, 1, DType::f32, 3, 1);
    base.problem.B = 2;
    ModCase c = mod_case("sink_grad_f32_window_b2", base, {}, {sliding_window(5, 0)},
                         {{"sinks", sink_logits(base.problem, {0.25, -2.0, 4.0})}});
    c.mods.sink = {attention_sinks()};
    cs.push_back(c);
  }
  return cs;
}

// Σ|terms| of each row's gradient, exp(sink − LSE) · Σ_d |dO ∘ O| (0 where the sink is −inf), the scale of
// its rounding errors: Delta's terms cancel.
inline std::vector<double> sink_grad_magnitude(const AttentionProblem& p, const AttentionInputs& in,
                                               const HostBuffer& dout, const ModCase& c) {
  const AttentionResult fwd = reference_with_mods(p, in, c.mods, c.tensors);
  const AttentionTensors64 t = logical_bwd_tensors(p, in, dout);
  const std::vector<double> one = reference_sink_gradient(p, in, dout, c.mods, c.tensors);
  std::vector<double> m(one.size(), 0.0);
  for (size_t row = 0; row < m.size(); ++row) {
    double abs_delta = 0, delta = 0;
    for (int64_t d = 0; d < p.D; ++d) {
      const size_t i = row * static_cast<size_t>(p.D) + static_cast<size_t>(d);
      abs_delta += std::abs(t.dout[i] * fwd.o[i]);
      delta += t.dout[i] * fwd.o[i];
    }
    // |grad| = exp(sink − LSE) · |Delta|, so the terms' scale is |grad| · Σ|dO ∘ O| / |Delta|.
    m[row] = delta == 0 ? 0.0 : std::abs(one[row]) * abs_delta / std::abs(delta);
  }
  return m;
}

// The per-head sums of a per-row [B, H, N_Q] vector.
inline std::vector<double> per_head_sums(const AttentionProblem& p, const std::vector<double>& rows) {
  std::vector<double> s(static_cast<size_t>(p.H), 0.0);
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t h = 0; h < p.H; ++h)
      for (int64_t i = 0; i < p.N_Q; ++i)
        s[static_cast<size_t>(h)] += rows[static_cast<size_t>((b * p.H + h) * p.N_Q + i)];
  return s;
}

inline void check_sink_grad_case(const ModCase& c, Executor executor = Executor::Interpreter) {
  const AttentionProblem& p = c.base.problem;
  const uint64_t seed = bwd_case_seed(p) + 0x51;
  AttentionInputs in = make_inputs(p, seed, c.base.input_scale);
  HostBuffer dout = make_dout(p, seed + 1, 1.0);
  const std::vector<double> ref = reference_sink_gradient(p, in, dout, c.mods, c.tensors);
  const std::vector<double> magnitude = sink_grad_magnitude(p, in, dout, c);
  const double tol =
      attention_grad_tolerance(p.dtype, p.tf32, max_abs_lse(reference_with_mods(p, in, c.mods, c.tensors)));

  const std::vector<double> rows = run_bwd_sink_gradient(p, c.mods, c.tensors, in, dout, false, executor);
  const Comparison by_row = compare_to_reference(rows, ref, magnitude);
  EXPECT_TRUE(by_row.ok(tol)) << c.name << " per row: " << by_row.str() << ", tolerance " << tol;
  // No term (a row that sees no key has O = 0; a −inf sink takes no share): exactly 0, never NaN.
  int64_t nonzero = 0;
  for (size_t i = 0; i < rows.size(); ++i)
    if (magnitude[i] == 0.0 && rows[i] != 0.0)
      ++nonzero;
  EXPECT_EQ(nonzero, 0) << c.name << ": rows with no term should get exactly 0";

  const std::vector<double> heads = run_bwd_sink_gradient(p, c.mods, c.tensors, in, dout, true, executor);
  const Comparison by_head = compare_to_reference(heads, per_head_sums(p, ref), per_head_sums(p, magnitude));
  EXPECT_TRUE(by_head.ok(tol)) << c.name << " per head: " << by_head.str() << ", tolerance " << tol;
  // The sum is taken in a fixed order: a second run gives the same bits.
  EXPECT_EQ(run_bwd_sink_gradient(p, c.mods, c.tensors, in, dout, true, executor), heads) << c.name;
}

} // namespace kiln::testing_support
