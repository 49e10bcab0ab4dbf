// The `kiln` command line on a GPU, run as a process: `kiln tune` on kernels without a host harness
// (matmul, vector add, softmax, FA1) and on FA2 through --shape; `kiln model --measure` on any kernel;
// `kiln attention` picking its config through the autotuner as KILN_AUTOTUNE says; and a user's tool on
// kiln::tool_main tuning and timing its own kernel. Each test has its own cache directory, so "tuned now"
// and "remembered" are facts of that directory, not of earlier runs.
#include "gpu/gpu_skip.h"
#include "kiln_tool_run.h"
#include "temp_dir.h"

#include <gtest/gtest.h>
#include <llvm/Support/JSON.h>

#include <sstream>

namespace kiln {
namespace {

using testing_support::TempDir;
using testing_support::ToolRun;

class CliGpuTest : public ::testing::Test {
protected:
  ToolRun kiln(const std::vector<std::string>& args, std::map<std::string, std::string> env = {}) {
    env.emplace("KILN_CACHE_DIR", cache_.path());
    return testing_support::run_kiln(scratch_.path(), args, env);
  }

  TempDir scratch_{"kiln-cli-gpu-test"};
  TempDir cache_{"kiln-cli-gpu-cache"};
};

// One row of format_tune_table: the marker, then the config column (as wide as the longest config, at least
// 60), then ms, TFLOP/s, GB/s, regs, smem, status.
struct TableRow {
  bool best = false;
  std::string config, ms, tflops, gbps, status;
  int regs = 0;
};

std::vector<TableRow> table_rows(const std::string& out) {
  std::vector<TableRow> rows;
  std::istringstream lines(out);
  std::string line;
  size_t width = 0; // of the config column, read off the header: "  config<pad> " then "ms" right-aligned in 10
  while (std::getline(lines, line)) {
    if (line.rfind("  config", 0) == 0 && line.find("GB/s") != std::string::npos) {
      width = line.find("ms") - 2 - 1 - 8;
      continue;
    }
    if (width == 0 || line.size() < width + 3 || (line[0] != '*' && line[0] != ' '))
      continue;
    TableRow r;
    r.best = line[0] == '*';
    r.config = line.substr(2, width);
    std::istringstream fields(line.substr(2 + width));
    int64_t smem = 0;
    fields >> r.ms >> r.tflops >> r.gbps >> r.regs >> smem;
    std::getline(fields, r.status);
    rows.push_back(r);
  }
  return rows;
}

const TableRow* best_row(const std::vector<TableRow>& rows) {
  for (const TableRow& r : rows)
    if (r.best)
      return &r;
  return nullptr;
}

double number(const std::string& s) { return s == "-" ? 0 : std::stod(s); }

TEST_F(CliGpuTest, TuneMatmulReportsTflopsAndRemembersTheWinner) {
  KILN_REQUIRE_GPU();
  ToolRun first = kiln({"tune", "matmul", "--shape", "M=512,N=512,K=256"});
  ASSERT_EQ(first.rc, 0) << first.out << first.err;
  EXPECT_NE(first.out.find("stride_am        = 256"), std::string::npos)
      << "derived strides listed: " << first.out;
  EXPECT_NE(first.out.find("chosen: "), std::string::npos) << first.out;
  EXPECT_NE(first.out.find("tuned now"), std::string::npos) << first.out;
  const std::vector<TableRow> rows = table_rows(first.out);
  EXPECT_GE(rows.size(), 2u) << first.out;
  const TableRow* best = best_row(rows);
  ASSERT_NE(best, nullptr) << first.out;
  EXPECT_NE(best->status.find("ok"), std::string::npos) << best->status;
  EXPECT_GT(number(best->ms), 0);
  EXPECT_GT(number(best->tflops), 0) << "matmul has a FLOP count";
  EXPECT_GT(best->regs, 0);

  ToolRun again = kiln({"tune", "matmul", "--shape", "M=500,N=512,K=256", "--cached"});
  ASSERT_EQ(again.rc, 0) << again.out << again.err;
  EXPECT_NE(again.out.find("remembered (tuning cache)"), std::string::npos) << "same bucket: " << again.out;
  auto chosen_of = [](const std::string& out) {
    const size_t at = out.find("chosen: ");
    return at == std::string::npos ? std::string("(none)") : out.substr(at, out.find(" —", at) - at);
  };
  EXPECT_EQ(chosen_of(again.out), chosen_of(first.out));
}

TEST_F(CliGpuTest, TuneVectorAddReportsBandwidth) {
  KILN_REQUIRE_GPU();
  ToolRun r = kiln({"tune", "vector_add", "--shape", "n=1000000"});
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  const std::vector<TableRow> rows = table_rows(r.out);
  EXPECT_EQ(rows.size(), 8u) << r.out;
  const TableRow* best = best_row(rows);
  ASSERT_NE(best, nullptr) << r.out;
  EXPECT_EQ(best->tflops, "-") << "no dots, no FLOP count";
  EXPECT_GT(number(best->gbps), 0) << r.out;
}

TEST_F(CliGpuTest, TuneKernelsWithoutAHostHarness) {
  KILN_REQUIRE_GPU();
  const std::vector<std::vector<std::string>> runs = {
      {"tune", "softmax", "--shape", "n_rows=2048,n_cols=1000,in_row_stride=1000,out_row_stride=1024",
       "--set", "BLOCK=1024,DTYPE=1"},
      {"tune", "fa1_fwd", "--shape", "B=1,H=2,H_KV=2,N_Q=256,N_K=256,D=64"},
      {"tune", "fa2_fwd", "--shape", "B=1,H=2,H_KV=1,N_Q=256,N_K=384,D=64", "--set", "CAUSAL=2"}};
  for (const std::vector<std::string>& args : runs) {
    ToolRun r = kiln(args);
    ASSERT_EQ(r.rc, 0) << args[1] << ": " << r.out << r.err;
    const TableRow* best = best_row(table_rows(r.out));
    ASSERT_NE(best, nullptr) << r.out;
    EXPECT_NE(best->status.find("ok"), std::string::npos) << r.out;
  }
  // fa2_fwd through --shape keys the problem as kiln::attention::forward does.
  ToolRun fa2 = kiln(runs[2]);
  EXPECT_NE(fa2.out.find("CAUSAL=2"), std::string::npos) << fa2.out;
}

TEST_F(CliGpuTest, ModelMeasuresAnyKernel) {
  KILN_REQUIRE_GPU();
  const std::vector<std::vector<std::string>> runs = {
      {"model", "matmul", "--shape", "M=1024,N=1024,K=1024", "--measure", "--json"},
      {"model", "vector_add", "--shape", "n=4194304", "--measure", "--json"},
      {"model", "fa2_fwd", "--shape", "B=1,H=4,H_KV=4,N_Q=1024,N_K=1024,D=64", "--measure", "--json"},
      {"model", "fa1_fwd", "--shape", "B=1,H=2,H_KV=2,N_Q=512,N_K=512,D=64", "--measure", "--json"}};
  for (const std::vector<std::string>& args : runs) {
    ToolRun r = kiln(args);
    ASSERT_EQ(r.rc, 0) << args[1] << ": " << r.out << r.err;
    auto v = llvm::json::parse(r.out);
    ASSERT_TRUE(bool(v)) << r.out;
    const llvm::json::Object& o = *v->getAsObject();
    ASSERT_TRUE(o.getNumber("measured_ms").hasValue()) << r.out;
    EXPECT_GT(*o.getNumber("measured_ms"), 0) << args[1];
    EXPECT_GT(*o.getNumber("predicted_ms"), 0) << args[1];
  }
  ToolRun text = kiln({"model", "vector_add", "--shape", "n=1048576", "--measure"});
  ASSERT_EQ(text.rc, 0) << text.err;
  EXPECT_NE(text.out.find("measured"), std::string::npos) << text.out;
}

// A user's tool on kiln::tool_main (tests/install/my_kiln.cpp) tunes and times its own LayerNorm as kiln does
// its kernels: inputs from the launch plan, every config of its space timed, the winner remembered and run.
TEST_F(CliGpuTest, AUsersToolTunesAndMeasuresItsOwnKernel) {
  KILN_REQUIRE_GPU();
  std::map<std::string, std::string> env{{"KILN_CACHE_DIR", cache_.path()}};
  const std::vector<std::string> tune = {"tune",  "layernorm",   "--shape", "n_rows=4096,n_cols=1000",
                                         "--set", "BLOCK_N=1024"};
  ToolRun r = testing_support::run_tool(testing_support::user_tool_path(), scratch_.path(), tune, env);
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  const std::vector<TableRow> rows = table_rows(r.out);
  EXPECT_EQ(rows.size(), 12u) << r.out; // ROWS 1, 2, 4 x num_warps 1, 2, 4, 8
  const TableRow* best = best_row(rows);
  ASSERT_NE(best, nullptr) << r.out;
  EXPECT_NE(best->status.find("ok"), std::string::npos) << r.out;
  EXPECT_GT(number(best->gbps), 0) << r.out;
  std::vector<std::string> cached = tune;
  cached.push_back("--cached");
  ToolRun again = testing_support::run_tool(testing_support::user_tool_path(), scratch_.path(), cached, env);
  ASSERT_EQ(again.rc, 0) << again.err;
  EXPECT_NE(again.out.find("remembered (tuning cache)"), std::string::npos) << again.out;

  // `run` on the GPU takes the remembered pick (BLOCK_N is no tuned parameter: --set keeps the key), checked.
  const size_t chosen_at = r.out.find("chosen: ");
  ASSERT_NE(chosen_at, std::string::npos) << r.out;
  const size_t chosen_end = r.out.find(" — ", chosen_at);
  const std::string chosen = r.out.substr(chosen_at + 8, chosen_end - chosen_at - 8);
  ToolRun run = testing_support::run_tool(
      testing_support::user_tool_path(), scratch_.path(),
      {"run", "layernorm", "--shape", "n_rows=4096,n_cols=1000", "--set", "BLOCK_N=1024", "--check"}, env);
  ASSERT_EQ(run.rc, 0) << run.out << run.err;
  EXPECT_NE(run.out.find("(" + chosen + "; autotuned, remembered in the tuning cache)"), std::string::npos)
      << chosen << "\n" << run.out;
  EXPECT_NE(run.out.find(") ok\n"), std::string::npos) << run.out;

  ToolRun m = testing_support::run_tool(testing_support::user_tool_path(), scratch_.path(),
                                        {"model", "layernorm", "--shape", "n_rows=4096,n_cols=1000", "--set",
                                         "BLOCK_N=1024", "--measure", "--json"},
                                        env);
  ASSERT_EQ(m.rc, 0) << m.err;
  auto v = llvm::json::parse(m.out);
  ASSERT_TRUE(bool(v)) << m.out;
  EXPECT_GT(v->getAsObject()->getNumber("measured_ms").getValueOr(0), 0) << m.out;
}

// `run --check` on the GPU (tools/run_command.cpp): the tutorials' kernels through the JIT on launch-plan inputs,
// each output compared with the kernel's registered double reference; a wrong reference still fails there.
TEST_F(CliGpuTest, RunChecksTheTutorialKernelsOnTheGpu) {
  KILN_REQUIRE_GPU();
  std::map<std::string, std::string> env{{"KILN_CACHE_DIR", cache_.path()}};
  const std::vector<std::vector<std::string>> runs = {
      {"run", "layernorm_fwd", "--shape", "n_rows=300,n_cols=4000", "--set", "BLOCK_N=4096", "--scalar",
       "eps=1e-5"},
      // a row that fills its tile: the kernel's loop without column checks or masks
      {"run", "layernorm_fwd", "--shape", "n_rows=301,n_cols=4096", "--set", "BLOCK_N=4096,ROWS=2", "--scalar",
       "eps=1e-5"},
      {"run", "layernorm_fwd", "--shape", "n_rows=301,n_cols=1024", "--set",
       "BLOCK_N=1024,ITERS=4,num_stages=3,num_warps=8", "--scalar", "eps=1e-5"},
      {"run", "matmul_bias_gelu", "--shape", "M=300,N=260,K=200"},
      {"run", "matmul_bias_gelu", "--shape", "M=256,N=256,K=256", "--set", "BLOCK_M=64,BLOCK_N=64,BLOCK_K=32"},
      {"run", "online_logsumexp", "--shape", "n_rows=37,n_cols=33000", "--set", "BLOCK_N=2048,ROWS=2"}};
  for (std::vector<std::string> args : runs) {
    args.push_back("--check");
    ToolRun r = testing_support::run_tool(testing_support::tutorial_tool_path(), scratch_.path(), args, env);
    EXPECT_EQ(r.rc, 0) << args[1] << ": " << r.out << r.err;
    EXPECT_NE(r.out.find("on the GPU"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(") ok\n"), std::string::npos) << r.out;
  }
  ToolRun wrong = testing_support::run_tool(
      testing_support::tutorial_tool_path(), scratch_.path(),
      {"run", "layernorm_wrong_reference", "--shape", "n_rows=64,n_cols=1000", "--check"}, env);
  EXPECT_EQ(wrong.rc, 1) << wrong.out << wrong.err;
  EXPECT_NE(wrong.err.find("the result does not match the reference"), std::string::npos) << wrong.err;
}

// kiln attention on the GPU uses the autotuner's config unless --set fixes one, and its result is still
// right.
TEST_F(CliGpuTest, AttentionPicksItsConfigThroughTheAutotuner) {
  KILN_REQUIRE_GPU();
  const std::vector<std::string> args = {"attention", "--batch", "1",          "--heads", "2",
                                         "--seq-q",   "200",     "--head-dim", "64",      "--check"};
  auto run = [&](const char* mode, std::vector<std::string> extra = {}) {
    std::vector<std::string> a = args;
    a.insert(a.end(), extra.begin(), extra.end());
    ToolRun r = kiln(a, {{"KILN_AUTOTUNE", mode}});
    EXPECT_EQ(r.rc, 0) << mode << ": " << r.out << r.err;
    EXPECT_NE(r.out.find("check O:"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
    return r.out;
  };
  EXPECT_NE(run("cached").find("KILN_AUTOTUNE=cached and nothing remembered"), std::string::npos);
  EXPECT_NE(run("force").find("autotuned now"), std::string::npos);
  EXPECT_NE(run("on").find("remembered in the tuning cache"), std::string::npos);
  EXPECT_NE(run("cached").find("remembered in the tuning cache"), std::string::npos);
  EXPECT_NE(run("off").find("KILN_AUTOTUNE=off"), std::string::npos);
  const std::string fixed = run("force", {"--set", "BLOCK_M=64,BLOCK_N=32"});
  EXPECT_NE(fixed.find("the default config with --set"), std::string::npos) << fixed;
  EXPECT_NE(fixed.find("BLOCK_M=64 BLOCK_N=32"), std::string::npos) << fixed;
}

// --varlen --bench: forward_varlen timed through the API after the check; with --backward, backward_varlen and the
// step, deterministic and (--nondeterministic) the faster pair; each line a median with a rate. The gradients
// --check holds to the reference are the API's (what the bench times), not the default configs'.
TEST_F(CliGpuTest, AttentionVarlenBenchTimesTheApiCalls) {
  KILN_REQUIRE_GPU();
  const std::vector<std::string> args = {"attention", "--varlen=300,0,129:500", "--heads=4", "--kv-heads=2",
                                         "--head-dim=64", "--causal=bottom-right", "--check", "--bench",
                                         "--reps=3"};
  for (std::vector<std::string> extra :
       {std::vector<std::string>{}, {"--backward"}, {"--backward", "--nondeterministic"}}) {
    std::vector<std::string> a = args;
    a.insert(a.end(), extra.begin(), extra.end());
    SCOPED_TRACE(a.size() > args.size() ? extra.back() : "forward");
    ToolRun r = kiln(a, {{"KILN_AUTOTUNE", "off"}});
    ASSERT_EQ(r.rc, 0) << r.out << r.err;
    EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
    const bool backward = !extra.empty();
    for (const char* line : backward ? std::vector<const char*>{"bench backward: median ", "bench forward+backward: median "}
                                     : std::vector<const char*>{"bench: median "}) {
      const size_t at = r.out.find(line);
      ASSERT_NE(at, std::string::npos) << r.out;
      EXPECT_NE(r.out.find("3 runs), ", at), std::string::npos) << r.out;
      EXPECT_NE(r.out.find(" TFLOP/s", at), std::string::npos) << r.out;
    }
    if (backward) {
      EXPECT_NE(r.out.find("configs as kiln::attention::backward_varlen picks them"), std::string::npos) << r.out;
      EXPECT_NE(r.out.find("check dQ:"), std::string::npos) << r.out;
    }
    if (extra.size() == 2) {
      EXPECT_NE(r.out.find("the faster of the two pairs"), std::string::npos) << r.out;
    }
  }
}

} // namespace
} // namespace kiln
