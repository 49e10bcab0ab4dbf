// The split-KV decoding cases the interpreter and GPU tests share (kernels/attention/decode_problem.h): query
// counts 1-16, MHA/GQA/MQA groups, key counts off the tile, per-sequence key counts with 0 and 1, paged
// caches of 16, 64 and 256 keys a page with shuffled block tables, and split counts from 1 to more than the
// key tiles. Each case is named after its shape, and checked O and LSE against the double reference with
// every element written (outputs and workspace start as NaN, cache rows past a sequence's keys hold NaN) and
// rows that see no key exactly O = 0, LSE = −inf.
#pragma once

#include "kernels/attention/attention_tolerance.h"
#include "kernels/attention/decode_problem.h"
#include "kernels/compare.h"

#include <gtest/gtest.h>

#include <limits>
#include <ostream>
#include <string>
#include <vector>

namespace kiln::testing_support {

struct DecodeCase {
  DecodeProblem problem;
  int64_t num_splits = 1;
  int64_t block_n = 16; // the split kernel's key tile (<= the page size)
  bool k_transposed = true;
};

inline std::string decode_case_name(const DecodeCase& c) {
  const DecodeProblem& p = c.problem;
  std::string s = "B" + std::to_string(p.B) + "_H" + std::to_string(p.H) + "kv" + std::to_string(p.H_KV) +
                  "_Nq" + std::to_string(p.N_Q) + "_Nk" + std::to_string(p.N_K) + "_D" + std::to_string(p.D) +
                  "_" + std::string(dtype_name(p.dtype)) + (p.causal ? "_causal" : "_full");
  if (p.paged())
    s += "_page" + std::to_string(p.page_size);
  if (!p.seqlens_k.empty()) {
    s += "_lens";
    for (int64_t n : p.seqlens_k)
      s += "_" + std::to_string(n);
  }
  s += "_split" + std::to_string(c.num_splits) + "_bn" + std::to_string(c.block_n);
  if (!c.k_transposed)
    s += "_kRow";
  return s;
}

inline void PrintTo(const DecodeCase& c, std::ostream* os) { *os << decode_case_name(c); }

inline DecodeCase decode_case(int64_t B, int64_t H, int64_t H_KV, int64_t N_Q, int64_t N_K, int64_t D,
                              int causal, int64_t num_splits, int64_t block_n, int64_t page_size = 0,
                              std::vector<int64_t> seqlens = {}, DType dt = DType::f16) {
  DecodeCase c;
  c.problem.B = B, c.problem.H = H, c.problem.H_KV = H_KV, c.problem.N_Q = N_Q, c.problem.N_K = N_K;
  c.problem.D = D, c.problem.causal = causal, c.problem.page_size = page_size;
  c.problem.seqlens_k = std::move(seqlens);
  c.problem.dtype = dt;
  c.num_splits = num_splits;
  c.block_n = block_n;
  return c;
}

// The sweep, at head dim `D` (16 or 32 in the interpreter; 64 and 128 on the GPU).
inline std::vector<DecodeCase> decode_sweep(int64_t D) {
  std::vector<DecodeCase> cs = {
      // Query counts 1, 4, 16 against groups of 1 (MHA), 4 (GQA) and 8 (MQA).
      decode_case(2, 2, 2, 1, 100, D, 2, 1, 16),
      decode_case(2, 8, 2, 4, 100, D, 2, 3, 32),
      decode_case(1, 8, 1, 16, 1000, D, 2, 4, 64), // 128 packed rows: two row tiles of 64
      decode_case(1, 4, 1, 16, 100, D, 0, 2, 32),
      decode_case(2, 4, 1, 4, 1000, D, 0, 5, 64),
      // One key: every split but the first is empty; with 16 queries only the last sees it (bottom-right).
      decode_case(2, 4, 1, 1, 1, D, 2, 1, 16),
      decode_case(1, 4, 4, 16, 1, D, 2, 4, 16),
      // More splits than key tiles (100 keys = 4 tiles of 32): empty splits must weigh nothing.
      decode_case(1, 4, 2, 4, 100, D, 2, 7, 32),
      // Per-sequence key counts, 0 and 1 among them.
      decode_case(4, 4, 2, 4, 300, D, 2, 5, 32, 0, {0, 1, 77, 300}),
      decode_case(3, 8, 1, 1, 1000, D, 0, 3, 64, 0, {1000, 0, 999}),
      // Paged caches, shuffled block tables: 16 keys a page (tiles of 16), 64, 256.
      decode_case(3, 4, 1, 1, 112, D, 2, 2, 16, 16, {100, 0, 37}),
      decode_case(2, 4, 4, 4, 100, D, 2, 3, 16, 16, {100, 1}),
      decode_case(2, 8, 2, 4, 1024, D, 2, 3, 64, 64, {1000, 513}),
      decode_case(2, 8, 2, 16, 256, D, 0, 2, 32, 64, {200, 64}),
      decode_case(2, 2, 1, 16, 768, D, 2, 1, 64, 256, {1, 700}),
      decode_case(3, 4, 2, 4, 512, D, 2, 9, 64, 256, {300, 0, 512}),
      // The other dtypes.
      decode_case(2, 4, 2, 4, 100, D, 2, 3, 32, 0, {}, DType::bf16),
      decode_case(2, 4, 2, 4, 100, D, 2, 3, 16, 16, {77, 100}, DType::f32),
  };
  DecodeCase k_row = decode_case(2, 8, 2, 4, 100, D, 2, 3, 32, 64, {100, 33});
  k_row.k_transposed = false; // K tiles loaded row-major and transposed on chip
  cs.push_back(k_row);
  return cs;
}

// The split config of case `c`: the problem's defaults with the case's key tile and K variant.
inline Config decode_case_split_config(const DecodeCase& c) {
  Config config = default_decode_split_config(c.problem);
  config.set("BLOCK_N", c.block_n).set("K_TRANSPOSED", c.k_transposed ? 1 : 0);
  return config;
}

inline void check_decode_case(const DecodeCase& c, const Config& split, const Config& combine,
                              Executor executor = Executor::Interpreter) {
  const DecodeProblem& p = c.problem;
  const uint64_t seed = 0xdec0de + static_cast<uint64_t>(p.B * 7 + p.H * 11 + p.N_Q * 13 + p.N_K * 17 +
                                                         p.D * 19 + p.page_size * 23 + c.num_splits * 29);
  const DecodeInputs in = make_decode_inputs(p, seed, 1.0);
  const AttentionResult ref = decode_reference(p, in);
  const AttentionResult out = run_decode(p, split, combine, c.num_splits, in, executor);

  const double tol = attention_tolerance(p.dtype, false, max_abs_lse(ref));
  const Comparison o = compare_to_reference(out.o, ref.o);
  EXPECT_TRUE(o.ok(tol)) << "O: " << o.str() << ", tolerance " << tol << " (" << p.str() << ")";
  const Comparison lse = compare_to_reference(out.lse, ref.lse);
  EXPECT_TRUE(lse.ok(tol)) << "LSE: " << lse.str() << ", tolerance " << tol << " (" << p.str() << ")";
  for (size_t row = 0; row < ref.lse.size(); ++row) { // no visible key: exactly O = 0 and LSE = -inf
    if (ref.lse[row] != -std::numeric_limits<double>::infinity())
      continue;
    ASSERT_EQ(out.lse[row], -std::numeric_limits<double>::infinity()) << "row " << row << " sees no key";
    for (int64_t d = 0; d < p.D; ++d)
      ASSERT_EQ(out.o[row * static_cast<size_t>(p.D) + static_cast<size_t>(d)], 0.0)
          << "row " << row << ", d " << d;
  }
}

} // namespace kiln::testing_support
