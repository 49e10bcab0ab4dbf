// How `run` picks its config on the GPU (tools/kernel_run.h, choose_gpu_config), in the parts that need no
// GPU: a --set of anything the autotuner would choose keeps the config as given, a kernel without a config
// space runs its default, and otherwise the autotuner is asked (which, without a GPU, says it needs one).
// tests/gpu/cli_gpu_test.cpp checks the pick itself on a GPU.
#include "kernels/matmul/matmul.h"
#include "runtime/cuda_driver.h"
#include "support/error.h"
#include "tools/kernel_run.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

namespace kiln {
namespace {

using cli::choose_gpu_config;

std::map<std::string, int64_t> matmul_sizes() { return {{"M", 256}, {"N", 256}, {"K", 128}}; }

TEST(RunConfigChoice, ASetOfWhatTheTunerChoosesKeepsTheConfigAsGiven) {
  for (const char* fixed : {"BLOCK_M", "num_warps", "num_stages"}) {
    std::map<std::string, int64_t> a = matmul_sizes();
    a[fixed] = fixed[0] == 'B' ? 64 : 2;
    const std::map<std::string, int64_t> before = a;
    const std::string source = choose_gpu_config(matmul_def(), a, {}, 1);
    EXPECT_EQ(source, fmt::format("the config as given: --set {} fixes what the autotuner would choose", fixed));
    EXPECT_EQ(a, before) << "the assignments are left as given";
  }
}

TEST(RunConfigChoice, AKernelWithoutASpaceRunsItsDefault) {
  KernelDef def = matmul_def();
  def.config_space = nullptr;
  std::map<std::string, int64_t> a = matmul_sizes();
  EXPECT_EQ(choose_gpu_config(def, a, {}, 1), "the default config: the kernel has no config space to tune");
  EXPECT_EQ(a, matmul_sizes());
}

TEST(RunConfigChoice, OtherwiseTheAutotunerIsAskedAndNeedsAGpu) {
  if (rt::driver_available())
    GTEST_SKIP() << "a CUDA driver is present: tests/gpu/cli_gpu_test.cpp checks the autotuner's pick";
  std::map<std::string, int64_t> a = matmul_sizes();
  try {
    (void)choose_gpu_config(matmul_def(), a, {}, 1);
    FAIL() << "expected a kiln::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("autotuning times every candidate on the GPU"), std::string::npos)
        << e.what();
  }
}

} // namespace
} // namespace kiln
