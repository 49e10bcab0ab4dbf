// matmul in the interpreter against its double reference: M, N, K not multiples of the tiles,
// row- and column-major A and B, f16/bf16/f32/tf32, several programs per group; C poisoned with NaN.
#include "kernels/compare.h"
#include "kernels/matmul/matmul.h"

#include <gtest/gtest.h>

using namespace kiln;

namespace {

struct MatmulCase {
  int64_t M, N, K;
  DType dtype;
  bool tf32, a_col_major, b_col_major;
};

class MatmulInterp : public ::testing::TestWithParam<MatmulCase> {};

TEST_P(MatmulInterp, MatchesReference) {
  const MatmulCase& tc = GetParam();
  MatmulProblem p{tc.M, tc.N, tc.K, tc.dtype, tc.tf32, tc.a_col_major, tc.b_col_major};
  Config c = default_matmul_config(p);
  c.set("BLOCK_M", 32).set("BLOCK_N", 32).set("BLOCK_K", 16).set("GROUP_M", 2);
  const uint64_t seed = 31 + static_cast<uint64_t>(tc.M * 7 + tc.N * 13 + tc.K * 17) + (tc.b_col_major ? 5 : 0);
  MatmulInputs in = make_matmul_inputs(p, seed, 2.0);
  std::vector<double> out = run_matmul_interpreted(p, c, in);
  Comparison cmp = compare_to_reference(out, matmul_reference(p, in));
  EXPECT_TRUE(cmp.ok(tolerance(p.dtype, p.tf32))) << cmp.str() << " tolerance " << tolerance(p.dtype, p.tf32);
}

std::string case_name(const ::testing::TestParamInfo<MatmulCase>& info) {
  const MatmulCase& c = info.param;
  return "M" + std::to_string(c.M) + "_N" + std::to_string(c.N) + "_K" + std::to_string(c.K) + "_" +
         std::string(dtype_name(c.dtype)) + (c.tf32 ? "_tf32" : "") + (c.a_col_major ? "_Acol" : "_Arow") +
         (c.b_col_major ? "_Bcol" : "_Brow");
}

void PrintTo(const MatmulCase& c, std::ostream* os) { *os << case_name({c, 0}); }

INSTANTIATE_TEST_SUITE_P(matmul, MatmulInterp,
                         ::testing::Values(MatmulCase{70, 45, 50, f16, false, false, false},
                                           MatmulCase{70, 45, 50, f16, false, false, true},
                                           MatmulCase{33, 100, 17, f16, false, true, true},
                                           MatmulCase{64, 64, 64, f16, false, false, false},
                                           MatmulCase{50, 70, 41, bf16, false, false, true},
                                           MatmulCase{45, 33, 29, f32, false, false, false},
                                           MatmulCase{45, 33, 29, f32, false, true, true},
                                           MatmulCase{40, 60, 37, f32, true, false, true}),
                         case_name);

} // namespace
