// The attention sweep FA1 and FA2 interpreter tests share: one case per line of the sweep, named so
// that a failure reads as its shape (fa2/Nq17_Nk100_D96_causalBR_f16_H4kv2_bshd), and the check every
// case runs: O and LSE against the double reference, every element written (outputs start as NaN),
// rows with no visible key exactly O = 0 and LSE = -inf.
#pragma once

#include "kernels/attention/attention_problem.h"
#include "kernels/attention/attention_tolerance.h"
#include "kernels/compare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <ostream>
#include <string>
#include <vector>

namespace kiln::testing_support {

struct AttentionCase {
  AttentionProblem problem;
  double input_scale = 1.0; // inputs uniform in [-input_scale, input_scale]
  int64_t block_m = 32, block_n = 16;
};

inline std::string attention_case_name(const AttentionCase& c) {
  const AttentionProblem& p = c.problem;
  static const char* causal[] = {"none", "TL", "BR"};
  std::string s = "Nq" + std::to_string(p.N_Q) + "_Nk" + std::to_string(p.N_K) + "_D" + std::to_string(p.D) +
                  "_causal" + causal[p.causal] + "_" + std::string(dtype_name(p.dtype)) + (p.tf32 ? "tf32" : "");
  if (p.H != 1 || p.H_KV != 1)
    s += "_H" + std::to_string(p.H) + "kv" + std::to_string(p.H_KV);
  if (p.B != 1)
    s += "_B" + std::to_string(p.B);
  s += p.bshd_layout ? "_bshd" : "_bhsd";
  s += p.k_transposed ? "_kT" : "_kRow";
  if (c.input_scale != 1.0)
    s += "_x" + std::to_string(static_cast<int>(c.input_scale));
  if (c.block_m != 32 || c.block_n != 16)
    s += "_bm" + std::to_string(c.block_m) + "bn" + std::to_string(c.block_n);
  return s;
}

// gtest prints a failing case by its name rather than its bytes.
inline void PrintTo(const AttentionCase& c, std::ostream* os) { *os << attention_case_name(c); }

inline AttentionCase make_case(int64_t nq, int64_t nk, int64_t d, int causal, DType dt, int64_t h = 1,
                               int64_t h_kv = 1, bool bshd = false, bool k_transposed = true, double scale = 1.0) {
  AttentionCase c;
  c.problem.B = 1;
  c.problem.H = h;
  c.problem.H_KV = h_kv;
  c.problem.N_Q = nq;
  c.problem.N_K = nk;
  c.problem.D = d;
  c.problem.causal = causal;
  c.problem.dtype = dt;
  c.problem.bshd_layout = bshd;
  c.problem.k_transposed = k_transposed;
  c.input_scale = scale;
  return c;
}

// The shared sweep: every (N_Q, N_K) pair below under each causal mode, with D, GQA, layout and the K
// variant rotating so that each appears with masked and unmasked tails; then the dtypes; then large
// inputs (scores in the hundreds: the online softmax must not overflow).
// Shapes where FA2's two-stage key loop and MASK_EVERY_TILE=1 differ most: causal both ways, N_Q != N_K,
// tails, rows with no visible key, GQA, f32.
inline std::vector<AttentionCase> masking_strategy_cases() {
  return {make_case(100, 100, 64, 1, DType::f16), make_case(17, 64, 32, 2, DType::f16),
          make_case(64, 17, 64, 2, DType::bf16), make_case(128, 100, 64, 0, DType::f16, 2, 1),
          make_case(255, 128, 96, 1, DType::f32)};
}

inline std::vector<AttentionCase> attention_sweep() {
  std::vector<AttentionCase> cases;
  const std::pair<int64_t, int64_t> sizes[] = {{1, 1},   {1, 255},  {17, 17},  {17, 100},
                                               {64, 64}, {100, 17}, {128, 255}, {255, 128}};
  const int64_t dims[] = {32, 64, 96, 128};
  const std::pair<int64_t, int64_t> heads[] = {{1, 1}, {4, 2}, {2, 1}};
  int n = 0;
  for (auto [nq, nk] : sizes)
    for (int causal = 0; causal < 3; ++causal, ++n) {
      auto [h, h_kv] = heads[n % 3];
      cases.push_back(make_case(nq, nk, dims[n % 4], causal, f16, h, h_kv, n % 2 == 1, (n / 2) % 2 == 0));
    }
  // dtypes: bf16, f32 exact, f32 with tf32 dots, on shapes with ragged tails and D padding.
  cases.push_back(make_case(17, 100, 96, 2, bf16, 4, 2, true, false));
  cases.push_back(make_case(100, 64, 64, 1, bf16, 1, 1, false, true));
  cases.push_back(make_case(17, 100, 96, 0, f32, 2, 1, false, true));
  cases.push_back(make_case(100, 17, 32, 2, f32, 1, 1, true, false));
  AttentionCase tf32 = make_case(64, 100, 64, 1, f32, 4, 1, false, true);
  tf32.problem.tf32 = true;
  cases.push_back(tf32);
  // Head dims FA2 covers with two tiles (SPLIT_D): D = 80 in 64 + 32 (the second tile past D), D = 48 in 32 + 16,
  // D = 192 in 128 + 64.
  cases.push_back(make_case(100, 17, 80, 1, f16, 2, 1, true, true));
  cases.push_back(make_case(17, 100, 48, 2, bf16, 1, 1, false, false));
  cases.push_back(make_case(64, 100, 192, 0, f16, 1, 1, false, true));
  // Large inputs (±30): scores reach the hundreds.
  cases.push_back(make_case(100, 128, 64, 0, f16, 1, 1, false, true, 30));
  cases.push_back(make_case(64, 100, 128, 2, bf16, 2, 2, true, false, 30));
  cases.push_back(make_case(64, 100, 32, 1, f32, 1, 1, false, true, 30));
  // Batches and wider tiles (BLOCK_M < BLOCK_N and larger BLOCK_N; several masked tiles per Q tile).
  AttentionCase batched = make_case(100, 100, 64, 1, f16, 2, 1, true, true);
  batched.problem.B = 2;
  cases.push_back(batched);
  AttentionCase wide = make_case(255, 255, 32, 2, f16, 1, 1, false, false);
  wide.block_m = 16;
  wide.block_n = 64;
  cases.push_back(wide);
  AttentionCase tall = make_case(100, 255, 64, 1, bf16, 1, 1, true, true);
  tall.block_m = 64;
  tall.block_n = 16;
  cases.push_back(tall);
  return cases;
}

// Runs `run` (an FA kernel, interpreted or on the GPU) on a case and checks O and LSE against the reference.
inline void check_attention_case(
    const AttentionCase& c,
    const std::function<AttentionResult(const AttentionProblem&, const Config&, const AttentionInputs&, Executor)>&
        run,
    const Config& config, Executor executor = Executor::Interpreter) {
  const AttentionProblem& p = c.problem;
  const uint64_t seed = 0x5eed + static_cast<uint64_t>(p.N_Q * 7919 + p.N_K * 104729 + p.D * 31 + p.causal * 3 +
                                                       p.H * 11 + p.H_KV * 13 + (p.bshd_layout ? 17 : 0) +
                                                       static_cast<int>(p.dtype) * 1009);
  AttentionInputs in = make_inputs(p, seed, c.input_scale);
  AttentionResult ref = reference(p, in);
  AttentionResult out = run(p, config, in, executor);

  const double tol = attention_tolerance(p.dtype, p.tf32, max_abs_lse(ref));
  Comparison o = compare_to_reference(out.o, ref.o);
  EXPECT_TRUE(o.ok(tol)) << "O: " << o.str() << ", tolerance " << tol << " (" << p.str() << ")";
  // LSE is f32 however the inputs are stored: its error is that of the scores, which carry the
  // input rounding, so it gets the same tolerance.
  Comparison lse = compare_to_reference(out.lse, ref.lse);
  EXPECT_TRUE(lse.ok(tol)) << "LSE: " << lse.str() << ", tolerance " << tol << " (" << p.str() << ")";

  // Rows with no visible key: exactly O = 0 and LSE = -inf (never NaN).
  for (size_t row = 0; row < ref.lse.size(); ++row) {
    if (ref.lse[row] != -std::numeric_limits<double>::infinity())
      continue;
    ASSERT_EQ(out.lse[row], -std::numeric_limits<double>::infinity()) << "row " << row << " has no visible key";
    for (int64_t d = 0; d < p.D; ++d)
      ASSERT_EQ(out.o[row * static_cast<size_t>(p.D) + static_cast<size_t>(d)], 0.0)
          << "row " << row << " has no visible key, O[" << d << "]";
  }
}

} // namespace kiln::testing_support
