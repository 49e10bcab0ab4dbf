// Generated code on the GPU, held to the same references (and the same sweep) as the interpreter:
// random inputs, outputs poisoned with NaN before every run, every element checked.
#include "gpu/gpu_skip.h"
#include "interp/attention_test_cases.h"
#include "jit/jit_kernel.h"
#include "kernels/attention/attention_problem.h"
#include "kernels/attention/fa1_fwd.h"
#include "kernels/attention/fa2_fwd.h"
#include "kernels/compare.h"
#include "kernels/matmul/matmul.h"
#include "kernels/softmax/softmax.h"
#include "kernels/vector_add/vector_add.h"
#include "runtime/cuda_driver.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace kiln;
using namespace kiln::testing_support;

namespace {


TEST(GpuVectorAdd, ExactAndMatchesInterpreter) {
  KILN_REQUIRE_GPU();
  for (int64_t n : {1, 1000, (1 << 20) + 3}) {
    HostBuffer x(DType::f32, n, "x"), y(DType::f32, n, "y"), out(DType::f32, n, "out");
    std::mt19937 rng(static_cast<unsigned>(n));
    std::uniform_real_distribution<float> u(-10, 10);
    for (int64_t i = 0; i < n; ++i) {
      x.data<float>()[i] = u(rng);
      y.data<float>()[i] = u(rng);
      out.data<float>()[i] = NAN;
    }
    const KernelDef& d = vector_add_def();
    Config c = d.default_config();
    std::vector<InterpArg> args = {InterpArg::ptr(x), InterpArg::ptr(y), InterpArg::ptr(out), InterpArg::of_int(n)};
    execute(Executor::Gpu, d.build(c), d.grid(c, {{"n", n}}), args);
    std::vector<float> ref(n);
    vector_add_reference(x.data<float>(), y.data<float>(), ref.data(), n);
    for (int64_t i = 0; i < n; ++i)
      ASSERT_EQ(out.data<float>()[i], ref[i]) << "n=" << n << " i=" << i;
  }
}

TEST(GpuSoftmax, MatchesReference) {
  KILN_REQUIRE_GPU();
  for (auto [rows, cols, dt] : {std::tuple{7, 1000, f32}, std::tuple{64, 128, f16}, std::tuple{3, 4097, f32},
                                std::tuple{33, 781, bf16}}) {
    SoftmaxProblem p{rows, cols, dt};
    HostBuffer in = make_softmax_input(p, 17 + rows, 8.0);
    for (int64_t rows_per_program : {1, 2, 4}) { // 7, 3 and 33 rows leave the last program's rows short
      Config config = softmax_config(p);
      config.set("ROWS", rows_per_program);
      std::vector<double> out = run_softmax_interpreted(p, config, in, Executor::Gpu);
      Comparison cmp = compare_to_reference(out, softmax_reference(p, in));
      EXPECT_TRUE(cmp.ok(tolerance(dt))) << rows << "x" << cols << " " << dtype_name(dt) << " ROWS=" << rows_per_program
                                         << ": " << cmp.str();
    }
  }
}

struct GpuMatmulCase {
  int64_t M, N, K;
  DType dtype;
  bool tf32, a_col, b_col;
  int64_t bm, bn, bk;
  int warps, stages;
};

class GpuMatmul : public ::testing::TestWithParam<GpuMatmulCase> {};

TEST_P(GpuMatmul, MatchesReference) {
  KILN_REQUIRE_GPU();
  const GpuMatmulCase& tc = GetParam();
  MatmulProblem p{tc.M, tc.N, tc.K, tc.dtype, tc.tf32, tc.a_col, tc.b_col};
  Config c = default_matmul_config(p);
  c.set("BLOCK_M", tc.bm).set("BLOCK_N", tc.bn).set("BLOCK_K", tc.bk);
  c.num_warps = tc.warps;
  c.num_stages = tc.stages;
  MatmulInputs in = make_matmul_inputs(p, 1234 + tc.M + tc.K, 1.0);
  std::vector<double> out = run_matmul_interpreted(p, c, in, Executor::Gpu);
  Comparison cmp = compare_to_reference(out, matmul_reference(p, in));
  double tol = tc.dtype == f32 && !tc.tf32 ? 1e-5 : tolerance(tc.dtype, tc.tf32);
  EXPECT_TRUE(cmp.ok(tol)) << cmp.str() << " tolerance " << tol << " config " << c.str();
}

INSTANTIATE_TEST_SUITE_P(
    matmul, GpuMatmul,
    ::testing::Values(GpuMatmulCase{512, 512, 512, f16, false, false, false, 128, 128, 32, 4, 3},
                      GpuMatmulCase{300, 200, 170, f16, false, false, true, 64, 64, 32, 4, 2},
                      GpuMatmulCase{257, 129, 96, bf16, false, true, false, 128, 64, 32, 8, 3},
                      GpuMatmulCase{128, 128, 64, f16, false, true, true, 32, 32, 16, 4, 2},
                      GpuMatmulCase{100, 90, 70, f32, true, false, false, 64, 64, 16, 4, 2},
                      GpuMatmulCase{100, 90, 70, f32, false, false, true, 32, 32, 16, 4, 2}),
    [](const auto& info) {
      const GpuMatmulCase& c = info.param;
      return "M" + std::to_string(c.M) + "_N" + std::to_string(c.N) + "_K" + std::to_string(c.K) + "_" +
             std::string(dtype_name(c.dtype)) + (c.tf32 ? "_tf32" : "") + (c.a_col ? "_Acol" : "") +
             (c.b_col ? "_Bcol" : "") + "_bm" + std::to_string(c.bm) + "_w" + std::to_string(c.warps);
    });

// The interpreter's whole attention sweep, on the GPU.
class GpuFa2Sweep : public ::testing::TestWithParam<AttentionCase> {};
TEST_P(GpuFa2Sweep, MatchesReference) {
  KILN_REQUIRE_GPU();
  const AttentionCase& c = GetParam();
  Config config = default_fa2_config(c.problem);
  config.set("BLOCK_M", std::max<int64_t>(c.block_m, 64)).set("BLOCK_N", std::max<int64_t>(c.block_n, 32));
  check_attention_case(c, run_fa2_interpreted, config, Executor::Gpu);
}
INSTANTIATE_TEST_SUITE_P(fa2, GpuFa2Sweep, ::testing::ValuesIn(attention_sweep()),
                         [](const auto& info) { return attention_case_name(info.param); });

// FA2's plain masking strategy (MASK_EVERY_TILE=1, the bench's seeds comparison) on the GPU.
TEST(GpuFa2, MaskingEveryTileMatchesReference) {
  KILN_REQUIRE_GPU();
  for (const AttentionCase& c : masking_strategy_cases()) {
    Config config = default_fa2_config(c.problem);
    config.set("BLOCK_M", 64).set("BLOCK_N", 32).set("MASK_EVERY_TILE", 1);
    SCOPED_TRACE(attention_case_name(c));
    check_attention_case(c, run_fa2_interpreted, config, Executor::Gpu);
  }
}

// On Hopper every f16/bf16 dot is a wgmma; this runs FA2 through mma.sync instead (CodegenOptions::wgmma
// off), the code sm_80-class GPUs get: panelled 128-byte shared tiles read by ldmatrix (D = 128), warps
// interleaved along M, both K-load variants, causal and not.
TEST(GpuFa2, MmaSyncPathMatchesReference) {
  KILN_REQUIRE_GPU();
  CodegenOptions no_wgmma;
  no_wgmma.wgmma = false;
  auto run = [&](const AttentionProblem& p, const Config& config, const AttentionInputs& in, Executor) {
    AttentionInputs inputs = in;
    AttentionOutputs out = make_outputs(p);
    std::shared_ptr<JitKernel> k = JitKernel::compile(build_fa2_fwd(config), {}, no_wgmma);
    run_on_gpu(*k, fa2_fwd_def().grid(config, attention_size_args(p)), fa2_interp_args(p, inputs, out));
    return gather_outputs(p, out);
  };
  for (int64_t d : {64, 128})
    for (int causal : {0, 1})
      for (bool k_transposed : {true, false}) {
        const AttentionCase c = make_case(200, 200, d, causal, DType::f16, 2, 1, false, k_transposed);
        Config config = default_fa2_config(c.problem);
        config.set("BLOCK_M", 128).set("BLOCK_N", 64);
        config.num_warps = 8;
        SCOPED_TRACE(attention_case_name(c));
        check_attention_case(c, run, config, Executor::Gpu);
      }
}

class GpuFa1Sweep : public ::testing::TestWithParam<AttentionCase> {};
TEST_P(GpuFa1Sweep, MatchesReference) {
  KILN_REQUIRE_GPU();
  const AttentionCase& c = GetParam();
  Config config = default_fa1_config(c.problem);
  config.set("BLOCK_M", c.block_m).set("BLOCK_N", c.block_n);
  check_attention_case(c, run_fa1_interpreted, config, Executor::Gpu);
}
INSTANTIATE_TEST_SUITE_P(fa1, GpuFa1Sweep, ::testing::ValuesIn(attention_sweep()),
                         [](const auto& info) { return attention_case_name(info.param); });

// Larger shapes and the configs the autotuner picks from.
struct BigCase {
  int64_t B, H, N, D;
  int causal;
  DType dtype;
  int64_t bm, bn;
  int warps, stages;
  bool k_transposed;
};
class GpuFa2Big : public ::testing::TestWithParam<BigCase> {};
TEST_P(GpuFa2Big, MatchesReference) {
  KILN_REQUIRE_GPU();
  const BigCase& b = GetParam();
  AttentionProblem p;
  p.B = b.B, p.H = b.H, p.H_KV = b.H, p.N_Q = b.N, p.N_K = b.N, p.D = b.D, p.dtype = b.dtype, p.causal = b.causal;
  p.k_transposed = b.k_transposed;
  Config c = default_fa2_config(p);
  c.set("BLOCK_M", b.bm).set("BLOCK_N", b.bn);
  c.num_warps = b.warps;
  c.num_stages = b.stages;
  AttentionInputs in = make_inputs(p, 99 + b.N + b.D, 2.0);
  AttentionResult ref = reference(p, in);
  AttentionResult out = run_fa2_interpreted(p, c, in, Executor::Gpu);
  Comparison o = compare_to_reference(out.o, ref.o), lse = compare_to_reference(out.lse, ref.lse);
  EXPECT_TRUE(o.ok(tolerance(p.dtype))) << "O " << o.str() << " " << p.str() << " " << c.str();
  EXPECT_TRUE(lse.ok(tolerance(p.dtype))) << "LSE " << lse.str();
}
INSTANTIATE_TEST_SUITE_P(fa2, GpuFa2Big,
                         ::testing::Values(BigCase{1, 2, 1024, 64, 0, f16, 128, 64, 4, 2, true},
                                           BigCase{1, 2, 1024, 64, 1, f16, 128, 64, 8, 3, false},
                                           BigCase{1, 1, 2048, 128, 0, bf16, 128, 64, 8, 2, true},
                                           BigCase{1, 1, 2048, 128, 1, f16, 64, 64, 4, 3, true},
                                           BigCase{2, 1, 1000, 256, 2, f16, 64, 32, 4, 2, true}),
                         [](const auto& info) {
                           const BigCase& b = info.param;
                           return "N" + std::to_string(b.N) + "_D" + std::to_string(b.D) + "_c" +
                                  std::to_string(b.causal) + "_" + std::string(dtype_name(b.dtype)) + "_bm" +
                                  std::to_string(b.bm) + "_bn" + std::to_string(b.bn) + "_w" +
                                  std::to_string(b.warps) + "_s" + std::to_string(b.stages) +
                                  (b.k_transposed ? "_kt" : "_krow");
                         });

} // namespace
