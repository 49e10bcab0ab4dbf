// Split-K matmul (matmul_split_k + matmul_split_k_reduce) in the interpreter against the double reference: K
// not a multiple of the tile or of the splits, more splits than K tiles (splits that cover nothing), tails in M
// and N, both layouts of A and B, f16/bf16/f32; W and C poisoned with NaN. Then the plan's CPU-side rules.
#include "kernels/compare.h"
#include "kernels/matmul/matmul_launch.h"
#include "kernels/matmul/matmul_split_k.h"

#include <gtest/gtest.h>

using namespace kiln;

namespace {

struct SplitKCase {
  int64_t M, N, K;
  DType dtype;
  bool a_col_major, b_col_major;
  int64_t split_k;
};

std::string case_name(const ::testing::TestParamInfo<SplitKCase>& info) {
  const SplitKCase& c = info.param;
  return "M" + std::to_string(c.M) + "_N" + std::to_string(c.N) + "_K" + std::to_string(c.K) + "_" +
         std::string(dtype_name(c.dtype)) + (c.a_col_major ? "_Acol" : "_Arow") + (c.b_col_major ? "_Bcol" : "_Brow") +
         "_split" + std::to_string(c.split_k);
}

void PrintTo(const SplitKCase& c, std::ostream* os) { *os << case_name({c, 0}); }

class MatmulSplitKInterp : public ::testing::TestWithParam<SplitKCase> {};

TEST_P(MatmulSplitKInterp, MatchesReference) {
  const SplitKCase& tc = GetParam();
  MatmulProblem p{tc.M, tc.N, tc.K, tc.dtype, false, tc.a_col_major, tc.b_col_major};
  Config partial = default_split_k_config(p);
  partial.set("BLOCK_M", 32).set("BLOCK_N", 32).set("BLOCK_K", 16).set("GROUP_M", 2).set("SPLIT_K", tc.split_k);
  Config reduce = default_split_k_reduce_config(p, tc.split_k);
  reduce.set("BLOCK_M", 16).set("BLOCK_N", 32);
  matmul_split_k_def().check(partial);
  matmul_split_k_reduce_def().check(reduce);
  MatmulInputs in = make_matmul_inputs(p, 97 + static_cast<uint64_t>(tc.M + 3 * tc.K + tc.split_k), 2.0);
  std::vector<double> out = run_matmul_split_k_interpreted(p, partial, reduce, in);
  Comparison cmp = compare_to_reference(out, matmul_reference(p, in));
  EXPECT_TRUE(cmp.ok(tolerance(p.dtype, false))) << cmp.str();
}

INSTANTIATE_TEST_SUITE_P(matmul_split_k, MatmulSplitKInterp,
                         ::testing::Values(SplitKCase{70, 45, 200, f16, false, false, 2}, // 13 K tiles: 7 + 6
                                           SplitKCase{70, 45, 200, f16, false, true, 3},  // 5 + 5 + 3
                                           SplitKCase{33, 50, 17, f16, true, true, 4},    // 2 K tiles: 2 splits empty
                                           SplitKCase{64, 64, 256, bf16, false, false, 4},
                                           SplitKCase{45, 33, 100, f32, true, false, 2},
                                           SplitKCase{16, 16, 16, f16, false, false, 1}),
                         case_name);

TEST(MatmulSplitK, EachSplitCoversWholeKTiles) {
  EXPECT_EQ(split_k_range(200, 16, 2), 112); // 13 tiles: 7 and 6
  EXPECT_EQ(split_k_range(200, 16, 3), 80);  // 5, 5, 3
  EXPECT_EQ(split_k_range(17, 16, 4), 16);   // 2 tiles: 1, 1, then nothing
  EXPECT_EQ(split_k_range(16384, 64, 4), 4096);
}

TEST(MatmulSplitK, TunedOnlyWhereTheOutputLeavesSmsIdle) {
  const MatmulProblem deep{1024, 1024, 16384, DType::f16};
  EXPECT_TRUE(split_k_worth_tuning(deep, 132));                                     // 64 tiles, 132 SMs
  EXPECT_FALSE(split_k_worth_tuning(deep, 64));                                     // every SM busy
  EXPECT_FALSE(split_k_worth_tuning(MatmulProblem{4096, 4096, 4096, DType::f16}, 132)); // 1024 tiles
  EXPECT_FALSE(split_k_worth_tuning(MatmulProblem{1024, 1024, 512, DType::f16}, 132));  // K too short to cut
}

TEST(MatmulSplitK, SpaceIsValidAndPrunesSplitsShorterThanTheRing) {
  const KernelDef def = matmul_split_k_def();
  const std::vector<Config> space = def.config_space();
  ASSERT_FALSE(space.empty());
  const SizeArgs deep = {{"M", 1024}, {"N", 1024}, {"K", 16384}}, shallow = {{"M", 1024}, {"N", 1024}, {"K", 512}};
  for (const Config& c : space) {
    def.check(c);
    EXPECT_EQ(def.prune(c, deep), "") << c.str();
    if (c.get("SPLIT_K") == 4) { // 512 / 64 = 8 K tiles: 2 a split, less than the ring
      EXPECT_NE(def.prune(c, shallow).find("fewer than twice"), std::string::npos) << c.str();
    }
  }
  EXPECT_EQ(def.grid(space[0], deep)[0], space[0].get("SPLIT_K") * 64);
}

TEST(MatmulSplitK, MismatchedSplitsAreRefused) {
  const MatmulProblem p{32, 32, 64, DType::f16};
  Config partial = default_split_k_config(p);
  partial.set("SPLIT_K", 3);
  const MatmulInputs in = make_matmul_inputs(p, 1, 1.0);
  try {
    run_matmul_split_k_interpreted(p, partial, default_split_k_reduce_config(p, 2), in);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("SPLIT_K=3 but the reduce's is 2"), std::string::npos) << e.what();
  }
}

} // namespace
