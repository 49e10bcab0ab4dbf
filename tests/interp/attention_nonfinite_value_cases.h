// Non-finite values (V) in the attention forward (docs/guarantees.md, "V"), as cases that the interpreter
// tests and the GPU tests run alike: NaN, +inf, -inf and both signs in one column, placed in keys that some
// rows see and others do not, inside key tiles those rows' programs visit (the causal diagonal tiles, the
// tail past N_K, every tile with MASK_EVERY_TILE=1). A key a row does not see contributes exactly nothing to
// it; a key it sees contributes its NaN or ±inf (IEEE sums: +inf and -inf in one column give NaN). The double
// reference selects so; the kernels, with EXACT_MASKED_V=1 (the problems here ask for it), are held to it
// element by element, every NaN and inf in its place. Without the option a hidden key's NaN or inf reaches the
// rows of its tile (attention_nonfinite_test.cpp pins that: AttentionNonFiniteKnownDeviation).
#pragma once

#include "interp/attention_test_cases.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <ostream>
#include <string>
#include <vector>

namespace kiln::testing_support {

struct ValuePoison {
  int64_t key, d;
  double value;
};

struct NonFiniteValueCase {
  std::string name;
  DType dtype;
  int causal;
  int64_t n_q, n_k; // n_k is not a multiple of any BLOCK_N the tests use: a tail tile
  std::vector<ValuePoison> poison;
  // Rows (b = h = 0) that do not see a poisoned key although their Q tile visits its key tile (with the
  // tests' smallest tiles, 32 x 16): they must stay finite. And rows that see it: non-finite in its column.
  std::vector<int64_t> finite_rows, poisoned_rows;
};

inline std::vector<NonFiniteValueCase> nonfinite_value_cases() {
  const double inf = std::numeric_limits<double>::infinity(), nan = std::nan("");
  std::vector<NonFiniteValueCase> cases;
  for (DType dt : {DType::f16, DType::bf16, DType::f32})
    for (int causal : {0, 1, 2}) {
      // Top-left: row i sees key j <= i, so rows 16..29 (in the 0..31 Q tile, which visits key tile 16..31
      // masked) do not see key 30. Bottom-right with 50 rows and 70 keys: row i sees j <= i + 20, so rows
      // 0..9 do not see key 30. Without causal masking every row sees every key; key 66 lies in the tail
      // tile.
      const int64_t n_q = causal == 2 ? 50 : 70, first_seeing_30 = causal == 1 ? 30 : causal == 2 ? 10 : 0;
      std::vector<int64_t> finite_rows, poisoned_rows{first_seeing_30, n_q - 1};
      if (causal == 1)
        finite_rows = {0, 16, 29};
      if (causal == 2)
        finite_rows = {0, 9};
      const std::string tag = std::string(dtype_name(dt)) + (causal == 0   ? ""
                                                             : causal == 1 ? "_causal_top_left"
                                                                           : "_causal_bottom_right");
      auto add = [&](const std::string& what, std::vector<ValuePoison> poison) {
        cases.push_back(
            {what + "_" + tag, dt, causal, n_q, 70, std::move(poison), finite_rows, poisoned_rows});
      };
      add("nan_in_value", {{30, 3, nan}});
      add("plus_inf_in_value", {{30, 3, inf}});
      add("minus_inf_in_value", {{30, 3, -inf}});
      // Both signs in column 3 (rows that see keys 30 and 40 get NaN, those seeing only 30 +inf), +inf twice
      // in column 7, a NaN in column 5, -inf in the tail tile (key 67) in column 9.
      add("mixed_in_values",
          {{30, 3, inf}, {40, 3, -inf}, {33, 7, inf}, {66, 7, inf}, {35, 5, nan}, {67, 9, -inf}});
    }
  return cases;
}

inline void PrintTo(const NonFiniteValueCase& c, std::ostream* os) { *os << c.name; }

// Runs `run` on one case (B = H = 1, D = 32) and holds O and LSE to the reference: every NaN and ±inf where
// the reference has it, the finite rest within the dtype's tolerance.
inline void
check_nonfinite_value_case(const NonFiniteValueCase& c,
                           const std::function<AttentionResult(const AttentionProblem&, const Config&,
                                                               const AttentionInputs&, Executor)>& run,
                           const std::function<Config(const AttentionProblem&)>& config_for,
                           Executor executor) {
  AttentionProblem p;
  p.B = 1, p.H = 1, p.H_KV = 1, p.N_Q = c.n_q, p.N_K = c.n_k, p.D = 32, p.dtype = c.dtype,
  p.causal = c.causal, p.exact_masked_v = true;
  AttentionInputs in = make_inputs(p, 79, 1.0);
  const AttentionStrides s = attention_strides(p);
  for (const ValuePoison& v : c.poison)
    in.v.set(element_offset(s.v, 0, 0, v.key, v.d), v.value);
  const AttentionResult ref = reference(p, in);
  const AttentionResult got = run(p, config_for(p), in, executor);
  const size_t D = static_cast<size_t>(p.D), d = static_cast<size_t>(c.poison[0].d);
  for (int64_t row : c.finite_rows) {
    ASSERT_TRUE(std::isfinite(ref.o[static_cast<size_t>(row) * D + d]))
        << "the reference disagrees at row " << row;
    EXPECT_TRUE(std::isfinite(got.o[static_cast<size_t>(row) * D + d]))
        << "row " << row << " does not see key " << c.poison[0].key << ", but O[" << row << ", " << d
        << "] is " << got.o[static_cast<size_t>(row) * D + d];
  }
  for (int64_t row : c.poisoned_rows) {
    ASSERT_FALSE(std::isfinite(ref.o[static_cast<size_t>(row) * D + d]))
        << "the reference disagrees at row " << row;
    EXPECT_FALSE(std::isfinite(got.o[static_cast<size_t>(row) * D + d])) << "row " << row;
  }
  // Everything as the reference says: NaN and ±inf exactly, LSE finite (V does not reach it).
  const double tol = attention_tolerance(p.dtype, p.tf32, max_abs_lse(ref));
  const Comparison co = compare_to_reference(got.o, ref.o), cl = compare_to_reference(got.lse, ref.lse);
  EXPECT_TRUE(co.ok(tol)) << "O: " << co.str();
  EXPECT_TRUE(cl.ok(tol)) << "LSE: " << cl.str();
}

} // namespace kiln::testing_support
