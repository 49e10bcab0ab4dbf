// `run KERNEL` in a user's tool (tools/run_command.cpp), without a GPU: tests/install/my_kiln.cpp's LayerNorm
// on .npy inputs (sizes read off the files) checked against its registered reference, its output written and
// read back; random inputs from the launch plan; a wrong reference failing with exit 1 and no file written
// (tests/tutorial_kernels_tool.cpp); and each bad input refused with a message naming what was expected.
#include "cli_test_fixture.h"
#include "runtime/cuda_driver.h"
#include "support/npy.h"

#include <gtest/gtest.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/raw_ostream.h>

#include <cmath>
#include <string>
#include <vector>

namespace kiln {
namespace {

using testing_support::CliTest;
using testing_support::ToolRun;

class RunCommandTest : public CliTest {
protected:
  ToolRun my_kiln(const std::vector<std::string>& args) {
    return tool(testing_support::user_tool_path(), args);
  }
  ToolRun tutorial_tool(const std::vector<std::string>& args) {
    return tool(testing_support::tutorial_tool_path(), args);
  }
  void expect_tool_error(const ToolRun& r, const char* program,
                         std::initializer_list<const char*> substrings) {
    EXPECT_EQ(r.rc, 1) << r.out << r.err;
    EXPECT_EQ(r.err.rfind(std::string(program) + ": error: ", 0), 0u) << r.err;
    for (const char* s : substrings)
      EXPECT_NE(r.err.find(s), std::string::npos) << "missing '" << s << "' in: " << r.err;
  }
  // A 5 x 48 LayerNorm problem: x, weight and bias files, and the expected y in double.
  void write_layernorm_inputs() {
    for (int64_t i = 0; i < rows_ * cols_; ++i)
      x_.push_back(std::sin(0.37 * static_cast<double>(i)) * 2 + 0.5);
    for (int64_t c = 0; c < cols_; ++c) {
      w_.push_back(1 + 0.01 * static_cast<double>(c));
      b_.push_back(0.1 * std::cos(static_cast<double>(c)));
    }
    x_path_ = write_npy("x.npy", {rows_, cols_}, x_);
    w_path_ = write_npy("w.npy", {cols_}, w_);
    b_path_ = write_npy("b.npy", {cols_}, b_);
  }
  std::vector<double> expected_layernorm(double eps) const {
    std::vector<double> y;
    for (int64_t r = 0; r < rows_; ++r) {
      double mean = 0, var = 0;
      for (int64_t c = 0; c < cols_; ++c)
        mean += static_cast<float>(x_[static_cast<size_t>(r * cols_ + c)]) / static_cast<double>(cols_);
      for (int64_t c = 0; c < cols_; ++c)
        var += std::pow(static_cast<float>(x_[static_cast<size_t>(r * cols_ + c)]) - mean, 2) /
               static_cast<double>(cols_);
      for (int64_t c = 0; c < cols_; ++c)
        y.push_back((static_cast<float>(x_[static_cast<size_t>(r * cols_ + c)]) - mean) /
                        std::sqrt(var + eps) * static_cast<float>(w_[static_cast<size_t>(c)]) +
                    static_cast<float>(b_[static_cast<size_t>(c)]));
    }
    return y;
  }
  std::vector<std::string> layernorm_args(std::vector<std::string> extra = {}) const {
    std::vector<std::string> a = {"run",   "layernorm",         "--in", "x=" + x_path_,
                                  "--in",  "weight=" + w_path_, "--in", "bias=" + b_path_,
                                  "--set", "BLOCK_N=64"};
    a.insert(a.end(), extra.begin(), extra.end());
    return a;
  }

  const int64_t rows_ = 5, cols_ = 48;
  std::vector<double> x_, w_, b_;
  std::string x_path_, w_path_, b_path_;
};

TEST_F(RunCommandTest, ChecksTheUsersKernelOnNpyInputsAndWritesItsOutput) {
  write_layernorm_inputs();
  const std::string y_path = path("y.npy");
  ToolRun r =
      my_kiln(layernorm_args({"--scalar", "eps=1e-5", "--out", "y=" + y_path, "--check", "--interpret"}));
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  // Sizes read off the files; inputs named by where they came from; one check line per output.
  EXPECT_NE(r.out.find("layernorm n_rows=5 n_cols=48 on the interpreter"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("x            f32 (5, 48): " + x_path_), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("check y: max abs error "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find(") ok\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("wrote " + y_path), std::string::npos) << r.out;

  const NpyArray y = read_npy(y_path);
  EXPECT_EQ(y.shape, (std::vector<int64_t>{rows_, cols_}));
  EXPECT_EQ(y.dtype_str(), "float32");
  const std::vector<double> want = expected_layernorm(1e-5);
  ASSERT_EQ(y.values.size(), want.size());
  for (size_t i = 0; i < want.size(); ++i)
    ASSERT_NEAR(y.values[i], want[i], 2e-5) << "element " << i;
}

TEST_F(RunCommandTest, BuffersNotGivenAreRandomAsTheLaunchPlanLaysThemOut) {
  ToolRun r = my_kiln({"run", "layernorm", "--shape", "n_rows=3,n_cols=20", "--set", "BLOCK_N=32,ROWS=2",
                       "--check", "--interpret", "--seed", "7"});
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("x            f32 (3, 20): random (seed 7)"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("y            f32 (3, 20): unset: written by the kernel"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("check y: "), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
}

TEST_F(RunCommandTest, AWrongReferenceFailsTheCheckAndWritesNothing) {
  const std::string y_path = path("y.npy");
  ToolRun r = tutorial_tool({"run", "layernorm_wrong_reference", "--shape", "n_rows=4,n_cols=100", "--set",
                             "BLOCK_N=128", "--check", "--interpret", "--out", "y=" + y_path});
  expect_tool_error(r, "kiln_tutorial_tool", {"the result does not match the reference; no output written"});
  EXPECT_NE(r.out.find("check y: max abs error 2."), std::string::npos) << r.out; // the 0.25 it adds
  EXPECT_NE(r.out.find("FAIL"), std::string::npos) << r.out;
  EXPECT_FALSE(llvm::sys::fs::exists(y_path));

  expect_tool_error(tutorial_tool({"run", "layernorm_no_reference", "--shape", "n_rows=4,n_cols=100",
                                   "--check", "--interpret"}),
                    "kiln_tutorial_tool",
                    {"kernel 'layernorm_no_reference' registers no reference (KernelDef::reference)"});
}

TEST_F(RunCommandTest, TheTutorialKernelsPassTheirChecks) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"run", "layernorm_fwd", "--shape", "n_rows=7,n_cols=300", "--set",
                                 "BLOCK_N=512"},
        std::vector<std::string>{"run", "matmul_bias_gelu", "--shape", "M=40,N=24,K=48", "--set",
                                 "BLOCK_M=16,BLOCK_N=16,BLOCK_K=16"},
        std::vector<std::string>{"run", "online_logsumexp", "--shape", "n_rows=3,n_cols=700", "--set",
                                 "BLOCK_N=128"}}) {
    std::vector<std::string> a = args;
    a.insert(a.end(), {"--check", "--interpret"});
    ToolRun r = tutorial_tool(a);
    EXPECT_EQ(r.rc, 0) << args[1] << ": " << r.out << r.err;
    EXPECT_NE(r.out.find(") ok\n"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
  }
}

// A kernel whose default config does not fit the problem (a 1024-wide row tile, 4096-wide rows) can still be
// tuned: the tuner picks among the configs that fit. Where one config is asked for, its grid is checked.
TEST_F(RunCommandTest, ADefaultConfigThatDoesNotFitIsLeftToTheTuner) {
  const std::vector<std::string> shape = {"--shape", "n_rows=64,n_cols=4096"};
  std::vector<std::string> tune = {"tune", "layernorm_fwd"};
  tune.insert(tune.end(), shape.begin(), shape.end());
  if (!rt::driver_available()) {
    ToolRun r = tutorial_tool(tune);
    EXPECT_EQ(r.rc, 1) << r.out << r.err;
    EXPECT_NE(r.err.find("times every candidate on the GPU"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("smaller than n_cols"), std::string::npos) << r.err;
  }
  std::vector<std::string> model = {"model", "layernorm_fwd"};
  model.insert(model.end(), shape.begin(), shape.end());
  ToolRun m = tutorial_tool(model);
  EXPECT_EQ(m.rc, 1) << m.out << m.err;
  EXPECT_NE(m.err.find("BLOCK_N=1024 is smaller than n_cols=4096"), std::string::npos) << m.err;
  model.insert(model.end(), {"--set", "BLOCK_N=4096"});
  EXPECT_EQ(tutorial_tool(model).rc, 0);
  std::vector<std::string> run = {"run", "layernorm_fwd", "--interpret"};
  run.insert(run.end(), shape.begin(), shape.end());
  ToolRun i = tutorial_tool(run);
  EXPECT_EQ(i.rc, 1) << i.out << i.err;
  EXPECT_NE(i.err.find("BLOCK_N=1024 is smaller than n_cols=4096"), std::string::npos) << i.err;
}

TEST_F(RunCommandTest, BadArgumentsAreRefusedWithWhatWasExpected) {
  write_layernorm_inputs();
  expect_tool_error(my_kiln({"run"}), "my_kiln", {"positional"});
  expect_tool_error(my_kiln({"run", "matmul", "--interpret"}), "my_kiln",
                    {"no kernel named 'matmul'; known kernels: layernorm"});
  expect_tool_error(my_kiln({"run", "layernorm", "--in", "x", "--interpret"}), "my_kiln",
                    {"--in expects NAME=FILE.npy", "got 'x'"});
  expect_tool_error(my_kiln({"run", "layernorm", "--shape", "n_rows=4", "--interpret"}), "my_kiln",
                    {"needs --shape values for n_cols"});
  expect_tool_error(
      my_kiln(layernorm_args({"--in", "z=" + x_path_, "--interpret"})), "my_kiln",
      {"--in z: kernel 'layernorm' has no buffer argument 'z'; its buffers are x, weight, bias, y"});
  expect_tool_error(my_kiln(layernorm_args({"--out", "x=" + path("o.npy"), "--interpret"})), "my_kiln",
                    {"--out x: kernel 'layernorm' does not write a buffer 'x'; the buffers it writes are y"});
  expect_tool_error(my_kiln(layernorm_args({"--out", "y=" + path(""), "--interpret"})), "my_kiln",
                    {"--out y"});
  expect_tool_error(my_kiln(layernorm_args({"--scalar", "eps=tiny", "--interpret"})), "my_kiln",
                    {"--scalar expects NAME=VALUE with a number VALUE", "got 'eps=tiny'"});
  expect_tool_error(my_kiln(layernorm_args({"--scalar", "epsilon=1", "--interpret"})), "my_kiln",
                    {"epsilon"});
  expect_tool_error(my_kiln({"run", "layernorm", "--in", "x=" + path("missing.npy"), "--interpret"}),
                    "my_kiln", {"missing.npy"});
  if (!rt::driver_available())
    expect_tool_error(my_kiln(layernorm_args()), "my_kiln", {"no CUDA driver found", "--interpret"});
}

TEST_F(RunCommandTest, FilesOfTheWrongDtypeOrShapeAreRefused) {
  write_layernorm_inputs();
  const std::string ints = write_int32_npy("ints.npy", {rows_, cols_});
  expect_tool_error(
      my_kiln({"run", "layernorm", "--in", "x=" + ints, "--set", "BLOCK_N=64", "--interpret"}), "my_kiln",
      {"(--in x): dtype int32 ('<i4') does not fit 'x', a f32 buffer; expected float16, float32 or "
       "float64"});
  // The weight's length disagrees with the rows of x.
  const std::string short_w = write_npy("short_w.npy", {40}, std::vector<double>(40, 1.0));
  expect_tool_error(my_kiln({"run", "layernorm", "--in", "x=" + x_path_, "--in", "weight=" + short_w, "--set",
                             "BLOCK_N=64", "--interpret"}),
                    "my_kiln", {"(--in weight) has n_cols=40 (dim 0 of shape (40,)), but", "has n_cols=48"});
  // A matrix where a vector is declared.
  const std::string matrix_w = write_npy("matrix_w.npy", {2, 48}, std::vector<double>(96, 1.0));
  expect_tool_error(my_kiln({"run", "layernorm", "--in", "weight=" + matrix_w, "--shape", "n_rows=5", "--set",
                             "BLOCK_N=64", "--interpret"}),
                    "my_kiln", {"(--in weight): shape (2, 48) has 2 dims; expected 1 ([n_cols])"});
  // --shape disagreeing with a file.
  expect_tool_error(my_kiln(layernorm_args({"--shape", "n_rows=6", "--interpret"})), "my_kiln",
                    {"(--in x) has n_rows=5 (dim 0 of shape (5, 48)), but --shape/--set gives n_rows=6"});
}

} // namespace
} // namespace kiln
