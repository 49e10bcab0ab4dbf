// Reading Nsight Compute's CSV (what `kiln compare-loads` does with ncu's output for bank conflicts).
#include "tools/ncu_metrics.h"

#include "support/error.h"

#include <gtest/gtest.h>

namespace kiln::cli {
namespace {

const std::vector<std::string> kMetrics = {kSharedBankConflicts, kSharedWavefronts};

// The shape ncu 2025 prints with --csv --metrics: progress lines, a header, one row per metric and kernel.
const char* const kTwoKernels =
    "==PROF== Connected to process 123\n"
    "==PROF== Profiling \"fa2_fwd\" - 0: 0%....50%....100% - 9 passes\n"
    "\"ID\",\"Process ID\",\"Process Name\",\"Host Name\",\"Kernel Name\",\"Context\",\"Stream\",\"Block Size\","
    "\"Grid Size\",\"Device\",\"CC\",\"Section Name\",\"Metric Name\",\"Metric Unit\",\"Metric Value\"\n"
    "\"0\",\"123\",\"kiln\",\"127.0.0.1\",\"fa2_fwd\",\"1\",\"7\",\"(128, 1, 1)\",\"(32, 32, 1)\",\"0\",\"9.0\","
    "\"Command line profiler metrics\",\"l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum\",\"\",\"1,234\"\n"
    "\"0\",\"123\",\"kiln\",\"127.0.0.1\",\"fa2_fwd\",\"1\",\"7\",\"(128, 1, 1)\",\"(32, 32, 1)\",\"0\",\"9.0\","
    "\"Command line profiler metrics\",\"l1tex__data_pipe_lsu_wavefronts_mem_shared.sum\",\"\",\"56,789\"\n"
    "\"1\",\"123\",\"kiln\",\"127.0.0.1\",\"fa2_fwd\",\"1\",\"7\",\"(128, 1, 1)\",\"(32, 32, 1)\",\"0\",\"9.0\","
    "\"Command line profiler metrics\",\"l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum\",\"\",\"5\"\n";

TEST(NcuMetrics, ReadsTheFirstKernelsValuesWithThousandsSeparators) {
  const std::map<std::string, double> v = parse_ncu_csv(kTwoKernels, kMetrics);
  EXPECT_EQ(v.at(kSharedBankConflicts), 1234) << "the first kernel's row, not the second's 5";
  EXPECT_EQ(v.at(kSharedWavefronts), 56789);
}

TEST(NcuMetrics, MissingTableOrMetricOrNumberIsAnError) {
  try {
    parse_ncu_csv("==ERROR== the application returned an error code (1)\n", kMetrics);
    FAIL() << "no table";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("no metric table"), std::string::npos) << e.what();
  }
  std::string one_metric = kTwoKernels;
  one_metric = one_metric.substr(0, one_metric.find("\"0\",\"123\",\"kiln\",\"127.0.0.1\",\"fa2_fwd\",\"1\",\"7\","
                                                    "\"(128, 1, 1)\",\"(32, 32, 1)\",\"0\",\"9.0\",\"Command line "
                                                    "profiler metrics\",\"l1tex__data_pipe_lsu"));
  try {
    parse_ncu_csv(one_metric, kMetrics);
    FAIL() << "one metric absent";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(kSharedWavefronts), std::string::npos) << e.what();
  }
  std::string not_a_number = kTwoKernels;
  not_a_number.replace(not_a_number.find("\"1,234\""), 7, "\"n/a\"");
  try {
    parse_ncu_csv(not_a_number, kMetrics);
    FAIL() << "n/a is not a number";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("not a number"), std::string::npos) << e.what();
  }
}

TEST(NcuMetrics, ArgumentsProfileOneLaunchOfTheKernelAsCsv) {
  const std::vector<std::string> args = ncu_arguments(kMetrics, "fa2_fwd", {"/bin/kiln", "compare-loads"});
  const std::vector<std::string> want = {"--csv",
                                         "--metrics",
                                         std::string(kSharedBankConflicts) + "," + kSharedWavefronts,
                                         "--kernel-name",
                                         "regex:fa2_fwd",
                                         "--launch-count",
                                         "1",
                                         "/bin/kiln",
                                         "compare-loads"};
  EXPECT_EQ(args, want);
}

} // namespace
} // namespace kiln::cli
