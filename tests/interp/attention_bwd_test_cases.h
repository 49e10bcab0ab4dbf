// The attention backward's interpreter and GPU checks share this: running a whole backward on a case of the
// attention sweep (attention_test_cases.h) and checking dQ, dK and dV against the analytic double-precision
// gradients, every output element written (outputs start as NaN), no NaN anywhere, and rows with no visible
// key sending exactly nothing back.
#pragma once

#include "attention_test_cases.h"
#include "kernels/attention/attention_bwd_problem.h"
#include "kernels/attention/attention_tolerance.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <tuple>

namespace kiln::testing_support {

// The relative L2 error a gradient may show (kernels/attention/attention_tolerance.h says why).
inline double grad_tolerance(DType t, bool tf32, double max_abs_lse) {
  return attention_grad_tolerance(t, tf32, max_abs_lse);
}

inline uint64_t bwd_case_seed(const AttentionProblem& p) {
  return 0xb4c4 + static_cast<uint64_t>(p.N_Q * 7919 + p.N_K * 104729 + p.D * 31 + p.causal * 3 + p.H * 11 +
                                        p.H_KV * 13 + (p.bshd_layout ? 17 : 0) + static_cast<int>(p.dtype) * 1009);
}

// A case's tiles (block_m, block_n) as the backward's, for the interpreter: 16-wide step tiles so that every case crosses several.
inline AttentionBwdConfigs interp_bwd_configs(const AttentionCase& c, bool atomic_dq) {
  AttentionBwdConfigs configs = default_bwd_configs(c.problem, atomic_dq);
  configs.dkdv.set("BLOCK_N", c.block_m).set("BLOCK_M", c.block_n);
  configs.dq.set("BLOCK_M", c.block_m).set("BLOCK_N", c.block_n);
  return configs;
}

// Runs the backward of `c` with `configs` and checks the three gradients; returns them for further checks.
inline AttentionGrads check_bwd_case(const AttentionCase& c, const AttentionBwdConfigs& configs,
                                     Executor executor = Executor::Interpreter) {
  const AttentionProblem& p = c.problem;
  const uint64_t seed = bwd_case_seed(p);
  AttentionInputs in = make_inputs(p, seed, c.input_scale);
  HostBuffer dout = make_dout(p, seed + 1, 1.0);
  AttentionBwdBuffers buffers = make_bwd_buffers(p, in, dout);
  run_bwd(p, configs, buffers, executor);
  AttentionGrads out = gather_grads(p, buffers);
  AttentionGrads ref = reference_backward(p, logical_bwd_tensors(p, in, dout));
  const double tol = grad_tolerance(p.dtype, p.tf32, max_abs_lse(p, in));
  // Gradients that must be exactly zero: dQ of a row that sees no key, dK and dV of a key no row sees.
  std::vector<bool> dq_zero(out.dq.size(), false), kv_zero(out.dk.size(), true);
  const size_t D = static_cast<size_t>(p.D);
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t h = 0; h < p.H; ++h)
      for (int64_t i = 0; i < p.N_Q; ++i) {
        bool sees_any = false;
        for (int64_t j = 0; j < p.N_K; ++j)
          if (visible(p, i, j)) {
            sees_any = true;
            const size_t key = static_cast<size_t>((b * p.H_KV + h / (p.H / p.H_KV)) * p.N_K + j);
            std::fill_n(kv_zero.begin() + static_cast<std::ptrdiff_t>(key * D), D, false);
          }
        const size_t row = static_cast<size_t>((b * p.H + h) * p.N_Q + i);
        std::fill_n(dq_zero.begin() + static_cast<std::ptrdiff_t>(row * D), D, !sees_any);
      }
  const std::array<GradComparison, 3> comparisons = compare_grads(out, ref);
  for (auto [name, got, cmp, zero] : {std::tuple{"dQ", &out.dq, comparisons[0].result, &dq_zero},
                                      {"dK", &out.dk, comparisons[1].result, &kv_zero},
                                      {"dV", &out.dv, comparisons[2].result, &kv_zero}}) {
    EXPECT_TRUE(cmp.ok(tol)) << name << ": " << cmp.str() << ", tolerance " << tol << " (" << p.str() << ")";
    int64_t nonzero = 0, first = -1;
    for (size_t i = 0; i < got->size(); ++i)
      if ((*zero)[i] && (*got)[i] != 0.0 && nonzero++ == 0)
        first = static_cast<int64_t>(i);
    EXPECT_EQ(nonzero, 0) << name << ": " << nonzero << " elements that see nothing should be exactly 0, the first at "
                          << first << " (" << p.str() << ")";
  }
  return out;
}

// A NaN in every element of V at key 30, which top-left causal rows 0..29 do not see, inside the key tiles their
// programs visit (70 rows and keys; any tiles of 32 and more, and the interpreter's 32 x 16): those rows' dQ stays
// finite (their dS at key 30 is selected to 0, not P = 0 times a NaN dP), and every gradient matches the
// reference, NaN where it is NaN (rows 30.. and, through them, every dK). The problem asks for EXACT_MASKED_V;
// `configs` gives the tiles.
inline void check_bwd_hidden_nan_value(DType dt, const std::function<AttentionBwdConfigs(const AttentionCase&)>& configs,
                                       Executor executor = Executor::Interpreter) {
  AttentionCase c = make_case(70, 70, 32, 1, dt);
  c.problem.exact_masked_v = true;
  const AttentionProblem& p = c.problem;
  AttentionInputs in = make_inputs(p, 80, 1.0);
  for (int64_t d = 0; d < p.D; ++d)
    in.v.set(element_offset(attention_strides(p).v, 0, 0, 30, d), std::nan(""));
  HostBuffer dout = make_dout(p, 81, 1.0);
  AttentionBwdBuffers buffers = make_bwd_buffers(p, in, dout);
  run_bwd(p, configs(c), buffers, executor);
  const AttentionGrads out = gather_grads(p, buffers);
  const AttentionGrads ref = reference_backward(p, logical_bwd_tensors(p, in, dout));
  const size_t D = static_cast<size_t>(p.D);
  for (size_t row = 0; row < 30; ++row)
    for (size_t d = 0; d < D; ++d)
      ASSERT_TRUE(std::isfinite(ref.dq[row * D + d]) && std::isfinite(out.dq[row * D + d]))
          << "dQ[" << row << ", " << d << "] is " << out.dq[row * D + d] << ": row " << row << " does not see key 30";
  const double tol = grad_tolerance(p.dtype, p.tf32, max_abs_lse(p, in));
  for (const GradComparison& g : compare_grads(out, ref))
    EXPECT_TRUE(g.result.ok(tol)) << g.name << ": " << g.result.str() << ", tolerance " << tol;
}

} // namespace kiln::testing_support
