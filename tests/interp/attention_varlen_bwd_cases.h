// The packed (varlen) backward's interpreter and GPU checks share this: a whole backward (preprocess, dK/dV,
// dQ or the atomic dQ and its convert) on a varlen case (attention_varlen_cases.h), dQ, dK and dV against the
// per-sequence analytic double-precision gradients, every output element written (outputs start as NaN), and
// rows that see no key and keys no row sees getting exactly 0.
#pragma once

#include "attention_varlen_cases.h"
#include "kernels/attention/attention_varlen_bwd_problem.h"

#include <algorithm>
#include <tuple>

namespace kiln::testing_support {

// A case's tiles as the backward's: the program tile is the case's block_m, the step tile its block_n.
inline AttentionBwdConfigs varlen_bwd_case_configs(const VarlenCase& c, bool atomic_dq) {
  AttentionBwdConfigs configs = default_varlen_bwd_configs(c.problem, atomic_dq);
  configs.dkdv.set("BLOCK_N", c.block_m).set("BLOCK_M", c.block_n);
  configs.dq.set("BLOCK_M", c.block_m).set("BLOCK_N", c.block_n);
  return configs;
}

inline void check_varlen_bwd_case(const VarlenCase& c, const AttentionBwdConfigs& configs,
                                  Executor executor = Executor::Interpreter) {
  const VarlenProblem& p = c.problem;
  const uint64_t seed = varlen_case_seed(c) + 0xb4c4;
  const AttentionInputs in = make_varlen_inputs(p, seed, c.input_scale);
  const HostBuffer dout = make_varlen_dout(p, seed + 1, 1.0);
  AttentionBwdBuffers buffers = make_varlen_bwd_buffers(p, in, dout);
  run_varlen_bwd(p, configs, buffers, executor);
  const AttentionGrads out = gather_varlen_grads(p, buffers), ref = varlen_reference_backward(p, in, dout);
  ASSERT_EQ(out.dq.size(), ref.dq.size());
  ASSERT_EQ(out.dk.size(), ref.dk.size());
  const double tol = attention_grad_tolerance(p.dtype, p.tf32, max_abs_lse(varlen_reference(p, in)));

  // Gradients that must be exactly zero: dQ of a row that sees no key, dK and dV of a key no row sees.
  const size_t D = static_cast<size_t>(p.D);
  std::vector<bool> dq_zero(out.dq.size(), true), kv_zero(out.dk.size(), true);
  const std::vector<int32_t> cu_q = p.cu_seqlens_q(), cu_k = p.cu_seqlens_k();
  for (int64_t b = 0; b < p.batch(); ++b) {
    const AttentionProblem sp = p.sequence(b);
    for (int64_t h = 0; h < p.H; ++h)
      for (int64_t i = 0; i < sp.N_Q; ++i)
        for (int64_t j = 0; j < sp.N_K; ++j)
          if (visible(sp, i, j)) {
            const size_t row = static_cast<size_t>((cu_q[static_cast<size_t>(b)] + i) * p.H + h);
            const size_t key =
                static_cast<size_t>((cu_k[static_cast<size_t>(b)] + j) * p.H_KV + h / (p.H / p.H_KV));
            std::fill_n(dq_zero.begin() + static_cast<std::ptrdiff_t>(row * D), D, false);
            std::fill_n(kv_zero.begin() + static_cast<std::ptrdiff_t>(key * D), D, false);
          }
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
    EXPECT_EQ(nonzero, 0) << name << ": " << nonzero
                          << " elements that see nothing should be exactly 0, the first at " << first << " ("
                          << p.str() << ")";
  }
}

} // namespace kiln::testing_support
