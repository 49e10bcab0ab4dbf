// The roofline model against hand counts: matmul and FA2 FLOPs and bytes per program and in total,
// boundary clipping of block-pointer tiles, causal tile skipping, scalar evaluation, and its errors.
#include "analysis/perf_model.h"
#include "dsl/dsl.h"
#include "kernels/attention/fa2_fwd.h"
#include "kernels/matmul/matmul.h"
#include "kernels/vector_add/vector_add.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

ScalarArgs fa2_args(int64_t B, int64_t H, int64_t NQ, int64_t NK, int64_t D) {
  return {{"B", B}, {"H", H}, {"H_KV", H}, {"N_Q", NQ}, {"N_K", NK}, {"D", D}};
}

Config fa2_config(int64_t bm, int64_t bn, int causal) {
  Config c = fa2_fwd_def().default_config();
  c.set("BLOCK_M", bm).set("BLOCK_N", bn).set("HEAD_DIM", 64).set("EVEN_D", 1).set("CAUSAL", causal);
  return c;
}

TEST(PerfModel, MatmulMatchesHandCounts) {
  Config c = matmul_def().default_config();
  c.set("BLOCK_M", 128).set("BLOCK_N", 64).set("BLOCK_K", 32).set("DTYPE", 0);
  const int64_t M = 256, N = 192, K = 96;
  const Grid grid = matmul_def().grid(c, {{"M", M}, {"N", N}, {"K", K}});
  ASSERT_EQ(grid[0], 2 * 3);
  CostEstimate e = estimate_cost(build_matmul(c), grid, {{"M", M}, {"N", N}, {"K", K}});
  EXPECT_EQ(e.programs, 6);
  EXPECT_EQ(e.programs_evaluated, 6);
  EXPECT_DOUBLE_EQ(e.total.matrix_flops, 2.0 * M * N * K);
  // Each program reads a 128 x K strip of A and a K x 64 strip of B (f16) and writes 128 x 64 of C.
  EXPECT_DOUBLE_EQ(e.per_program().bytes_loaded, (128.0 * K + K * 64.0) * 2);
  EXPECT_DOUBLE_EQ(e.total.bytes_stored, 2.0 * M * N);
  EXPECT_DOUBLE_EQ(e.intensity(), e.total.matrix_flops / (e.total.bytes_loaded + e.total.bytes_stored));
}

TEST(PerfModel, MatmulTailTilesAreClipped) {
  Config c = matmul_def().default_config();
  c.set("BLOCK_M", 64).set("BLOCK_N", 64).set("BLOCK_K", 32).set("DTYPE", 2); // f32
  const int64_t M = 100, N = 64, K = 64; // the second row of tiles holds 36 rows
  const Grid grid = matmul_def().grid(c, {{"M", M}, {"N", N}, {"K", K}});
  CostEstimate e = estimate_cost(build_matmul(c), grid, {{"M", M}, {"N", N}, {"K", K}});
  // Matrix FLOPs count whole tiles (the tensor cores do the padded work): 2 programs x 2·64·64·64.
  EXPECT_DOUBLE_EQ(e.total.matrix_flops, 2 * 2.0 * 64 * 64 * 64);
  // Bytes count only the elements inside the tensors: A once (M·K), B once per program, C once.
  EXPECT_DOUBLE_EQ(e.total.bytes_loaded, (M * K + 2.0 * K * N) * 4);
  EXPECT_DOUBLE_EQ(e.total.bytes_stored, M * N * 4.0);
}

TEST(PerfModel, Fa2NonCausalMatchesHandCounts) {
  const int64_t B = 2, H = 3, N = 256, D = 64, BM = 128, BN = 64;
  Config c = fa2_config(BM, BN, 0);
  const Grid grid = fa2_fwd_def().grid(c, {{"B", B}, {"H", H}, {"N_Q", N}});
  CostEstimate e = estimate_cost(build_fa2_fwd(c), grid, fa2_args(B, H, N, N, D));
  EXPECT_EQ(e.programs, (N / BM) * B * H);
  EXPECT_DOUBLE_EQ(e.total.matrix_flops, 4.0 * B * H * N * N * D);
  // Per program: Q (BM x D) once, K and V (BN x D each) per key tile, all f16; O (BM x D) f16 and
  // LSE (BM f32) stored.
  const Cost per = e.per_program();
  EXPECT_DOUBLE_EQ(per.bytes_loaded, BM * D * 2.0 + (N / BN) * 2.0 * BN * D * 2);
  EXPECT_DOUBLE_EQ(per.bytes_stored, BM * D * 2.0 + BM * 4.0);
  EXPECT_GT(per.vector_flops, 0); // the online softmax
}

TEST(PerfModel, Fa2KeyTailIsClipped) {
  const int64_t NQ = 128, NK = 200, D = 64;
  Config c = fa2_config(128, 64, 0);
  CostEstimate e = estimate_cost(build_fa2_fwd(c), fa2_fwd_def().grid(c, {{"B", 1}, {"H", 1}, {"N_Q", NQ}}),
                                 fa2_args(1, 1, NQ, NK, D));
  ASSERT_EQ(e.programs, 1);
  // 4 key tiles are visited (the last masked); K and V loads read only the 200 existing keys.
  EXPECT_DOUBLE_EQ(e.total.matrix_flops, 4 * 2 * (2.0 * 128 * 64 * 64));
  EXPECT_DOUBLE_EQ(e.total.bytes_loaded, NQ * D * 2.0 + 2.0 * NK * D * 2);
}

TEST(PerfModel, Fa2CausalSkipsTilesAboveTheDiagonal) {
  const int64_t N = 256, D = 64;
  Config c = fa2_config(128, 64, 1); // top-left
  CostEstimate e = estimate_cost(build_fa2_fwd(c), fa2_fwd_def().grid(c, {{"B", 1}, {"H", 1}, {"N_Q", N}}),
                                 fa2_args(1, 1, N, N, D));
  // Rows 0..127 visit key tiles 0..1, rows 128..255 tiles 0..3: 6 tiles of two (128x64x64) dots.
  EXPECT_DOUBLE_EQ(e.total.matrix_flops, 6 * 2 * (2.0 * 128 * 64 * 64));
  EXPECT_DOUBLE_EQ(e.total.bytes_loaded, 2 * 128 * D * 2.0 + 6 * 2 * (64.0 * D * 2));
}

TEST(PerfModel, VectorAddCountsElementwiseWork) {
  Config c = vector_add_def().default_config();
  c.set("BLOCK", 256);
  const int64_t n = 1000;
  const Grid grid = vector_add_def().grid(c, {{"n", n}});
  CostEstimate e = estimate_cost(build_vector_add(c), grid, {{"n", n}});
  ASSERT_EQ(e.programs, 4);
  EXPECT_EQ(e.total.matrix_flops, 0);
  // Masked pointer loads/stores count whole tiles (the mask is data): an upper bound.
  EXPECT_DOUBLE_EQ(e.total.bytes_loaded, 4 * 2 * 256 * 4.0);
  EXPECT_DOUBLE_EQ(e.total.bytes_stored, 4 * 256 * 4.0);
  EXPECT_GE(e.total.vector_flops, 4 * 256.0);
}

// Loop bounds and branches are evaluated with the interpreter's scalar rules (dsl/scalar_eval.h): `!` of an
// i1 is logical (the model once took it as a bitwise not, so !true was true) and i32 arithmetic wraps.
TEST(PerfModel, ScalarsFollowTheInterpretersRules) {
  KernelBuilder kb("scalar_rules");
  Value out = kb.arg_ptr("out", f32), n = kb.arg("n", i32);
  if_(
      !(n > 4), [&] { store(out + arange(0, 64), full({64}, 1, f32)); },
      [&] { store(out + arange(0, 128), full({128}, 1, f32)); });
  // 10 / 3 + 10 * 2^16 * 2^16, which wraps to 3 in i32: three trips of one 32-element store.
  Value trips = n / 3 + n * 65536 * 65536;
  for_range(0, trips, 1, [&](Value) { store(out + arange(0, 32), full({32}, 2, f32)); });
  CostEstimate e = estimate_cost(kb.finish(), {1, 1, 1}, {{"n", 10}});
  EXPECT_DOUBLE_EQ(e.total.bytes_stored, (128 + 3 * 32) * 4.0);
}

// A branch on tensor data (a reduction of a loaded tile) is unknown before the kernel runs: the model takes the
// then branch, the common case by the kernels' convention (FA2's masked tiles with EXACT_MASKED_V=1 branch on V
// being finite).
TEST(PerfModel, BranchOnTensorDataTakesTheThenBranch) {
  KernelBuilder kb("data_branch");
  Value in = kb.arg_ptr("in", f32), out = kb.arg_ptr("out", f32);
  Value x = load(in + arange(0, 64)); // (64,) f32
  if_(
      max(x, 0) > 0.0f, [&] { store(out + arange(0, 128), full({128}, 1, f32)); },
      [&] { store(out + arange(0, 64), x); });
  CostEstimate e = estimate_cost(kb.finish(), {1, 1, 1}, {});
  EXPECT_DOUBLE_EQ(e.total.bytes_stored, 128 * 4.0);
}

TEST(PerfModel, RooflinePicksTheSlowerResource) {
  CostEstimate e;
  e.programs = 1;
  e.total.matrix_flops = 1e12;
  e.total.bytes_loaded = 1e9;
  Roofline r = roofline(e, 1000, 1000); // 1 ms of compute, 1 ms of memory
  EXPECT_DOUBLE_EQ(r.compute_s, 1e-3);
  EXPECT_DOUBLE_EQ(r.memory_s, 1e-3);
  e.total.bytes_loaded = 4e9;
  r = roofline(e, 1000, 1000);
  EXPECT_FALSE(r.compute_bound());
  EXPECT_DOUBLE_EQ(r.time_s(), 4e-3);
  EXPECT_DOUBLE_EQ(r.ridge_intensity(), 1000.0);
  EXPECT_THROW(roofline(e, 0, 1000), Error);
}

TEST(PerfModel, MissingOrUnknownArgumentsAreErrors) {
  Config c = fa2_config(128, 64, 0);
  const Grid grid{2, 1, 1};
  ScalarArgs args = fa2_args(1, 1, 256, 256, 64);
  args.erase("N_K");
  try {
    estimate_cost(build_fa2_fwd(c), grid, args);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cannot evaluate"), std::string::npos) << e.what();
  }
  args = fa2_args(1, 1, 256, 256, 64);
  args["SEQ"] = 3;
  try {
    estimate_cost(build_fa2_fwd(c), grid, args);
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no scalar argument 'SEQ'"), std::string::npos) << e.what();
  }
}

TEST(PerfModel, LargeGridsAreSampledAndScaled) {
  Config c = vector_add_def().default_config();
  c.set("BLOCK", 128);
  const int64_t n = 128 * 1000;
  CostEstimate e = estimate_cost(build_vector_add(c), vector_add_def().grid(c, {{"n", n}}), {{"n", n}}, 100);
  EXPECT_EQ(e.programs, 1000);
  EXPECT_EQ(e.programs_evaluated, 100);
  EXPECT_DOUBLE_EQ(e.total.bytes_stored, n * 4.0);
}

} // namespace
} // namespace kiln
