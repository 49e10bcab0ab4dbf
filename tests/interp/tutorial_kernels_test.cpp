// The tutorials' kernels (examples/kernels/: LayerNorm forward, matmul + bias + GELU, online logsumexp) in
// the interpreter against their double-precision references, through the run library `kiln run --check` uses
// (tools/kernel_run.h): ragged shapes (partial tiles, chunks and row groups), several configs, and inputs a
// naive kernel gets wrong (large logits that overflow exp without the running maximum, rows of -inf).
#include "examples/kernels/layernorm_fwd.h"
#include "examples/kernels/matmul_bias_gelu.h"
#include "examples/kernels/online_logsumexp.h"
#include "tools/kernel_run.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace kiln {
namespace {

using cli::InputFile;
using cli::KernelRun;
using cli::OutputCheck;

// Runs `def` in the interpreter on the problem and returns its checks (each must pass).
std::vector<OutputCheck> run_and_check(const KernelDef& def,
                                       const std::map<std::string, int64_t>& assignments,
                                       const ArgValues& scalars = {},
                                       const std::vector<InputFile>& files = {}) {
  KernelRun run = cli::prepare_kernel_run(def, assignments, scalars, files, 11);
  cli::execute_kernel_run(run, Executor::Interpreter);
  std::vector<OutputCheck> checks = cli::check_kernel_run(run);
  for (const OutputCheck& c : checks)
    EXPECT_TRUE(c.ok()) << def.name << ": " << c.str();
  return checks;
}

TEST(TutorialKernels, LayerNormMatchesItsReference) {
  const KernelDef def = tutorial::layernorm_fwd_def();
  for (auto [rows, cols, block_n, rows_per_program] :
       {std::tuple{1, 1, 16, 1}, {5, 100, 128, 2}, {33, 1000, 1024, 4}, {8, 64, 64, 1}}) {
    SCOPED_TRACE(testing::Message() << rows << "x" << cols << " BLOCK_N=" << block_n);
    const auto checks = run_and_check(
        def, {{"n_rows", rows}, {"n_cols", cols}, {"BLOCK_N", block_n}, {"ROWS", rows_per_program}},
        {{"eps", 1e-5}});
    ASSERT_EQ(checks.size(), 1u);
    EXPECT_EQ(checks[0].name, "y");
    EXPECT_EQ(checks[0].tolerance, tolerance(DType::f16));
  }
}

TEST(TutorialKernels, MatmulBiasGeluMatchesItsReference) {
  const KernelDef def = tutorial::matmul_bias_gelu_def();
  for (auto [M, N, K, bm, bn, bk] : {std::tuple{16, 16, 16, 16, 16, 16},
                                     {40, 24, 48, 16, 16, 16},
                                     {70, 90, 100, 32, 32, 32},
                                     {17, 130, 33, 64, 64, 16}}) {
    SCOPED_TRACE(testing::Message() << M << "x" << N << "x" << K);
    run_and_check(
        def,
        {{"M", M}, {"N", N}, {"K", K}, {"BLOCK_M", bm}, {"BLOCK_N", bn}, {"BLOCK_K", bk}, {"GROUP_M", 2}});
  }
}

TEST(TutorialKernels, OnlineLogsumexpMatchesItsReference) {
  const KernelDef def = tutorial::online_logsumexp_def();
  for (auto [rows, cols, block_n, rows_per_program] :
       {std::tuple{1, 1, 16, 1}, {3, 700, 128, 2}, {9, 3000, 256, 4}, {4, 512, 512, 1}}) {
    SCOPED_TRACE(testing::Message() << rows << "x" << cols << " BLOCK_N=" << block_n);
    run_and_check(def,
                  {{"n_rows", rows}, {"n_cols", cols}, {"BLOCK_N", block_n}, {"ROWS", rows_per_program}});
  }
}

// Logits near f16's largest value overflow exp(x) in f32 without the running maximum, a row of -inf has
// logsumexp -inf (no NaN from -inf - -inf), and the maximum arriving in a late chunk rescales the sum: in the
// masked loop (600 columns in chunks of 128) and in the unmasked one (640).
TEST(TutorialKernels, OnlineLogsumexpIsStableOnExtremeRows) {
  for (const int64_t cols : {600, 640}) {
    SCOPED_TRACE(testing::Message() << cols << " columns");
    const int64_t rows = 3;
    NpyArray x;
    x.shape = {rows, cols};
    const double inf = std::numeric_limits<double>::infinity();
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t c = 0; c < cols; ++c)
        x.values.push_back(r == 0 ? 60000.0 : r == 1 ? -inf : (c == cols - 1 ? 30.0 : -1.0));
    InputFile f{"x", "--in x", "extreme rows", x};
    // A temporary def: the run keeps its own copy (KernelProblem::def), so the sanitizer preset's ASan finds no
    // use after scope here (it did when the problem held a pointer).
    KernelRun run = cli::prepare_kernel_run(tutorial::online_logsumexp_def(),
                                            {{"n_rows", rows}, {"n_cols", cols}, {"BLOCK_N", 128}}, {}, {f}, 1);
    cli::execute_kernel_run(run, Executor::Interpreter);
    const std::vector<double> out = run.buffer("out")->tensor_values();
    ASSERT_EQ(out.size(), 3u);
    EXPECT_NEAR(out[0], 60000.0 + std::log(static_cast<double>(cols)), 0.05);
    EXPECT_EQ(out[1], -inf);
    EXPECT_NEAR(out[2], 30.0 + std::log(1 + (cols - 1) * std::exp(-31.0)), 1e-4);
    for (const OutputCheck& c : cli::check_kernel_run(run))
      EXPECT_TRUE(c.ok()) << c.str();
  }
}

// The run library refuses a file whose shape is not the declared one, naming the dims it expected.
TEST(TutorialKernels, ARunRefusesAFileOfTheWrongShape) {
  NpyArray bias;
  bias.shape = {7};
  bias.values.assign(7, 0.0);
  InputFile f{"bias", "--in bias", "bias.npy", bias};
  try {
    const KernelDef def = tutorial::matmul_bias_gelu_def();
    (void)cli::prepare_kernel_run(def, {{"M", 16}, {"N", 16}, {"K", 16}}, {}, {f}, 1);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(
        std::string(e.what()).find("'bias.npy' (--in bias): shape (7,) does not match the problem; expected "
                                   "(16,) ([N])"),
        std::string::npos)
        << e.what();
  }
}

} // namespace
} // namespace kiln
