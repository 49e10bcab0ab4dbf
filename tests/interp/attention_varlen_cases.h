// The packed (varlen) attention cases the interpreter and GPU tests share, and the check each runs: O and LSE
// against the double-precision per-sequence reference, every element written (outputs start as NaN), rows
// that see no key exactly O = 0 and LSE = −inf. Lengths run from 0 to 300, with N_Q ≠ N_K per sequence, empty
// query and key sequences, causal both ways, GQA, padded token strides, the dtypes and the K variants.
#pragma once

#include "kernels/attention/attention_tolerance.h"
#include "kernels/attention/attention_varlen_problem.h"
#include "kernels/compare.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <ostream>
#include <random>
#include <string>
#include <vector>

namespace kiln::testing_support {

struct VarlenCase {
  std::string name;
  VarlenProblem problem;
  int64_t block_m = 32, block_n = 16;
  double input_scale = 1.0;
};

inline void PrintTo(const VarlenCase& c, std::ostream* os) { *os << c.name; }

inline VarlenCase varlen_case(std::string name, std::vector<int64_t> q, std::vector<int64_t> k, int64_t d,
                              int causal, DType dt = DType::f16, int64_t h = 1, int64_t h_kv = 1) {
  VarlenCase c;
  c.name = std::move(name);
  c.problem.seqlens_q = std::move(q);
  c.problem.seqlens_k = std::move(k);
  c.problem.D = d;
  c.problem.causal = causal;
  c.problem.dtype = dt;
  c.problem.H = h;
  c.problem.H_KV = h_kv;
  return c;
}

inline std::vector<VarlenCase> varlen_cases() {
  // Ragged lengths with empty sequences at the ends and inside, one of 300 (ten 32-row tiles), one of 1.
  const std::vector<int64_t> ragged = {0, 1, 17, 300, 5, 0, 64, 33};
  // Per sequence N_Q != N_K both ways, a query sequence with no keys, keys with no queries.
  const std::vector<int64_t> q = {3, 0, 40, 130, 1, 77, 16, 200};
  const std::vector<int64_t> k = {50, 12, 0, 70, 300, 77, 1, 129};
  std::vector<VarlenCase> cs;
  for (int causal = 0; causal < 3; ++causal) {
    static const char* names[] = {"none", "TL", "BR"};
    cs.push_back(varlen_case(std::string("ragged_causal") + names[causal], ragged, ragged, 32, causal,
                             DType::f16, 2, 1));
    cs.push_back(
        varlen_case(std::string("nq_ne_nk_causal") + names[causal], q, k, 32, causal, DType::f16, 4, 2));
  }
  VarlenCase d96 =
      varlen_case("d96_bf16_causalBR_kRow", {100, 7, 0, 64}, {33, 64, 5, 150}, 96, 2, DType::bf16, 2, 2);
  d96.problem.k_transposed = false;
  cs.push_back(d96);
  VarlenCase f32 = varlen_case("f32_causalTL_padded", {18, 0, 90}, {40, 3, 90}, 64, 1, DType::f32, 3, 1);
  f32.problem.token_pad = 8;
  cs.push_back(f32);
  VarlenCase tf32 = varlen_case("tf32_none", {31, 65}, {64, 17}, 32, 0, DType::f32, 2, 2);
  tf32.problem.tf32 = true;
  cs.push_back(tf32);
  VarlenCase padded =
      varlen_case("f16_causalBR_padded_H4kv1", {60, 1, 129}, {1, 60, 128}, 64, 2, DType::f16, 4, 1);
  padded.problem.token_pad = 16;
  cs.push_back(padded);
  cs.push_back(varlen_case("no_keys_at_all", {5, 0, 40}, {0, 0, 0}, 32, 0));
  cs.push_back(varlen_case("no_rows_at_all", {0, 0}, {10, 20}, 32, 1));
  cs.push_back(varlen_case("no_sequences", {}, {}, 32, 0));
  VarlenCase large = varlen_case("large_inputs_causalTL", {100, 50}, {100, 120}, 32, 1, DType::bf16);
  large.input_scale = 30;
  cs.push_back(large);
  VarlenCase wide = varlen_case("bm16_bn64_causalBR", {255, 3, 70}, {255, 100, 7}, 32, 2);
  wide.block_m = 16, wide.block_n = 64;
  cs.push_back(wide);
  VarlenCase tall = varlen_case("bm64_bn16_causalTL", {100, 65}, {255, 64}, 32, 1, DType::bf16, 2, 1);
  tall.block_m = 64, tall.block_n = 16;
  cs.push_back(tall);
  return cs;
}

// Random packed problem `index` of a fixed sequence: 1 to 6 sequences with lengths from 0 to 300 drawn apart
// for queries and keys (one in five empty), causal modes, GQA groups, head dims, dtypes, K variants, padded
// token strides and tiles all drawn from a seed, so that every run checks the same problems and a failure
// names its index.
inline VarlenCase random_varlen_case(int index) {
  std::mt19937_64 rng(0x7a51d + static_cast<uint64_t>(index));
  auto pick = [&](int64_t n) { return static_cast<int64_t>(rng() % static_cast<uint64_t>(n)); };
  auto length = [&] { return pick(5) == 0 ? int64_t{0} : 1 + pick(300); };
  VarlenCase c;
  c.name = "random" + std::to_string(index);
  const int64_t B = 1 + pick(6);
  for (int64_t b = 0; b < B; ++b) {
    c.problem.seqlens_q.push_back(length());
    c.problem.seqlens_k.push_back(pick(3) == 0 ? c.problem.seqlens_q.back() : length());
  }
  const int64_t dims[] = {16, 32, 40, 64};
  const DType dtypes[] = {DType::f16, DType::bf16, DType::f32};
  c.problem.H_KV = 1 + pick(2);
  c.problem.H = c.problem.H_KV * (1 + pick(3));
  c.problem.D = dims[pick(4)];
  c.problem.dtype = dtypes[pick(3)];
  c.problem.causal = static_cast<int>(pick(3));
  c.problem.k_transposed = pick(2) == 0;
  c.problem.token_pad = 8 * pick(2);
  const int64_t tiles[] = {16, 32, 64};
  c.block_m = tiles[pick(3)];
  c.block_n = tiles[pick(3)];
  return c;
}

using VarlenRunFn =
    std::function<AttentionResult(const VarlenProblem&, const Config&, const AttentionInputs&, Executor)>;

// The config a case runs with: the default for its problem with the case's tiles.
inline Config varlen_case_config(const VarlenCase& c) {
  Config config = default_fa2_varlen_config(c.problem);
  config.set("BLOCK_M", c.block_m).set("BLOCK_N", c.block_n);
  return config;
}

inline uint64_t varlen_case_seed(const VarlenCase& c) {
  uint64_t seed = 0x7a51 + static_cast<uint64_t>(c.problem.D * 31 + c.problem.causal * 3 + c.problem.H * 11);
  for (int64_t n : c.problem.seqlens_q)
    seed = seed * 131 + static_cast<uint64_t>(n);
  for (int64_t n : c.problem.seqlens_k)
    seed = seed * 137 + static_cast<uint64_t>(n);
  return seed;
}

// Checks `run`'s O and LSE against the per-sequence reference.
inline void check_varlen_case(const VarlenCase& c, const VarlenRunFn& run, const Config& config,
                              Executor executor = Executor::Interpreter) {
  const VarlenProblem& p = c.problem;
  const AttentionInputs in = make_varlen_inputs(p, varlen_case_seed(c), c.input_scale);
  const AttentionResult ref = varlen_reference(p, in);
  const AttentionResult out = run(p, config, in, executor);
  ASSERT_EQ(out.o.size(), ref.o.size());
  ASSERT_EQ(out.lse.size(), ref.lse.size());

  const double tol = attention_tolerance(p.dtype, p.tf32, max_abs_lse(ref));
  const Comparison o = compare_to_reference(out.o, ref.o);
  EXPECT_TRUE(o.ok(tol)) << "O: " << o.str() << ", tolerance " << tol << " (" << p.str() << ")";
  const Comparison lse = compare_to_reference(out.lse, ref.lse);
  EXPECT_TRUE(lse.ok(tol)) << "LSE: " << lse.str() << ", tolerance " << tol << " (" << p.str() << ")";

  // Rows with no visible key: exactly O = 0 and LSE = −inf (never NaN). LSE is [H, total_q], O [total_q, H,
  // D].
  const int64_t total_q = p.total_q();
  for (int64_t h = 0; h < p.H; ++h)
    for (int64_t t = 0; t < total_q; ++t) {
      if (ref.lse[static_cast<size_t>(h * total_q + t)] != -std::numeric_limits<double>::infinity())
        continue;
      ASSERT_EQ(out.lse[static_cast<size_t>(h * total_q + t)], -std::numeric_limits<double>::infinity())
          << "token " << t << " head " << h << " sees no key";
      for (int64_t d = 0; d < p.D; ++d)
        ASSERT_EQ(out.o[static_cast<size_t>((t * p.H + h) * p.D + d)], 0.0)
            << "token " << t << " head " << h << " sees no key, O[" << d << "]";
    }
}

} // namespace kiln::testing_support
