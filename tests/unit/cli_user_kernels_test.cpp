// A user's own command line on kiln::tool_main (kiln/tool_main.h): tests/install/my_kiln.cpp, a program that
// registers a LayerNorm of its own and none of kiln's kernels, run as a process (user_tool_path()). list,
// emit at every stage that needs no GPU, model, the checks tune makes before it needs one, and the errors for
// a kernel it does not have. On a GPU, tests/gpu/cli_gpu_test.cpp tunes and times it.
#include "cli_test_fixture.h"
#include "runtime/cuda_driver.h"
#include "runtime/nvrtc.h"

#include <gtest/gtest.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/JSON.h>
#include <llvm/Support/Program.h>

#include <string>
#include <vector>

namespace kiln {
namespace {

using testing_support::CliTest;
using testing_support::slurp;
using testing_support::ToolRun;

class UserToolTest : public CliTest {
protected:
  ToolRun my_kiln(const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {}) {
    return tool(testing_support::user_tool_path(), args, env);
  }
  // Exit code 1 and a "my_kiln: error: " line (the program's own name) holding every substring.
  void expect_my_kiln_error(const ToolRun& r, std::initializer_list<const char*> substrings) {
    EXPECT_EQ(r.rc, 1) << r.out << r.err;
    EXPECT_EQ(r.err.rfind("my_kiln: error: ", 0), 0u) << r.err;
    for (const char* s : substrings)
      EXPECT_NE(r.err.find(s), std::string::npos) << "missing '" << s << "' in: " << r.err;
  }
};

TEST_F(UserToolTest, ListShowsTheUsersKernelAndNoneOfKilns) {
  ToolRun t = my_kiln({"list"});
  ASSERT_EQ(t.rc, 0) << t.err;
  EXPECT_NE(t.out.find("layernorm\n  row-wise LayerNorm forward"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("BLOCK_N"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("config space: 12 configs"), std::string::npos) << t.out;
  EXPECT_NE(t.out.find("tuning key:   n_cols"), std::string::npos) << t.out;
  EXPECT_EQ(t.out.find("matmul"), std::string::npos) << "kiln's kernels are not in this registry: " << t.out;

  ToolRun j = my_kiln({"list", "--json"});
  ASSERT_EQ(j.rc, 0) << j.err;
  auto v = llvm::json::parse(j.out);
  ASSERT_TRUE(bool(v)) << j.out;
  ASSERT_EQ(v->getAsArray()->size(), 1u);
  const llvm::json::Object& o = *(*v->getAsArray())[0].getAsObject();
  EXPECT_EQ(o.getString("name"), llvm::StringRef("layernorm"));
  EXPECT_EQ(o.getArray("size_args")->size(), 2u);
}

TEST_F(UserToolTest, EmitIrLoweredAndCuda) {
  ToolRun ir = my_kiln({"emit", "layernorm", "--stage", "ir", "--set", "BLOCK_N=1024,ROWS=2"});
  ASSERT_EQ(ir.rc, 0) << ir.err;
  EXPECT_NE(ir.out.find("kernel @layernorm"), std::string::npos) << ir.out;
  EXPECT_NE(ir.out.find("BLOCK_N=1024 ROWS=2"), std::string::npos) << ir.out;
  EXPECT_NE(ir.out.find("rsqrt"), std::string::npos) << ir.out;

  ToolRun low = my_kiln({"emit", "layernorm", "--stage=lowered", "--arch", "sm_80"});
  ASSERT_EQ(low.rc, 0) << low.err;
  EXPECT_NE(low.out.find("lowered layernorm"), std::string::npos) << low.out;

  const std::string file = path("layernorm.cu");
  ToolRun cu = my_kiln({"emit", "layernorm", "--stage", "cuda", "--arch", "sm_90a", "-o", file});
  ASSERT_EQ(cu.rc, 0) << cu.err;
  EXPECT_TRUE(cu.out.empty());
  EXPECT_NE(slurp(file).find("__global__"), std::string::npos);
  EXPECT_NE(slurp(file).find("layernorm"), std::string::npos);
}

TEST_F(UserToolTest, EmitPtxAndSassWithResourceUsage) {
  std::string why;
  if (!rt::nvrtc_available(&why))
    GTEST_SKIP() << "NVRTC not available: " << why;
  ToolRun ptx = my_kiln({"emit", "layernorm", "--stage", "ptx", "--arch", "sm_80", "--set", "BLOCK_N=512"});
  ASSERT_EQ(ptx.rc, 0) << ptx.err;
  EXPECT_NE(ptx.out.find(".entry layernorm"), std::string::npos) << ptx.out.substr(0, 2000);
  EXPECT_NE(ptx.out.find(".target sm_80"), std::string::npos);
  EXPECT_NE(ptx.err.find("my_kiln: resource usage: layernorm on sm_80: registers "), std::string::npos)
      << ptx.err;
  EXPECT_NE(ptx.err.find("spill stores"), std::string::npos) << ptx.err;

  // SASS needs cuobjdump: where it is found, the disassembly; elsewhere the error that says so.
  const bool have_cuobjdump = static_cast<bool>(llvm::sys::findProgramByName("cuobjdump")) ||
                              llvm::sys::fs::exists("/usr/local/cuda/bin/cuobjdump");
  ToolRun sass = my_kiln({"emit", "layernorm", "--stage", "sass", "--arch", "sm_90a"});
  if (have_cuobjdump) {
    ASSERT_EQ(sass.rc, 0) << sass.err;
    EXPECT_NE(sass.out.find("layernorm"), std::string::npos) << sass.out.substr(0, 2000);
  } else {
    expect_my_kiln_error(sass, {"cuobjdump", "--stage ptx"});
  }
}

TEST_F(UserToolTest, ModelCountsTheUsersKernel) {
  ToolRun m = my_kiln({"model", "layernorm", "--shape", "n_rows=4096,n_cols=1000", "--set",
                       "BLOCK_N=1024,ROWS=2", "--peak-gbps", "1000", "--peak-tflops", "100", "--json"});
  ASSERT_EQ(m.rc, 0) << m.err;
  auto v = llvm::json::parse(m.out);
  ASSERT_TRUE(bool(v)) << m.out;
  const llvm::json::Object& o = *v->getAsObject();
  EXPECT_EQ(o.getString("kernel"), llvm::StringRef("layernorm"));
  EXPECT_EQ(o.getInteger("programs").getValueOr(-1), 2048); // 4096 rows, 2 a program
  EXPECT_EQ(o.getNumber("matrix_flops").getValueOr(-1), 0);
  // Whole tiles, as the model counts them (masked lanes included): a program reads its ROWS x BLOCK_N tile and
  // the weight and bias tiles, and writes its tile; f32.
  EXPECT_DOUBLE_EQ(o.getNumber("bytes_loaded").getValueOr(-1), 2048.0 * (2 * 1024 + 2 * 1024) * 4) << m.out;
  EXPECT_DOUBLE_EQ(o.getNumber("bytes_stored").getValueOr(-1), 2048.0 * 2 * 1024 * 4) << m.out;
  EXPECT_EQ(o.getString("bound"), llvm::StringRef("memory"));

  // The kernel's own grid rule refuses a tile shorter than the row, as its author wrote it.
  expect_my_kiln_error(my_kiln({"model", "layernorm", "--shape", "n_rows=8,n_cols=1000"}),
                       {"BLOCK_N=256 is smaller than n_cols=1000"});
  expect_my_kiln_error(my_kiln({"model", "layernorm", "--shape", "n_rows=8"}),
                       {"needs --shape values for n_cols"});
}

TEST_F(UserToolTest, TuneChecksTheProblemBeforeNeedingAGpu) {
  expect_my_kiln_error(my_kiln({"tune", "layernorm", "--shape", "n_rows=64,n_cols=100", "--set", "BLOCK=64"}),
                       {"no parameter, size or scalar argument 'BLOCK'", "ROWS, BLOCK_N"});
  if (!rt::driver_available())
    expect_my_kiln_error(my_kiln({"tune", "layernorm", "--shape", "n_rows=64,n_cols=100"}),
                         {"no CUDA driver found", "autotuning times every candidate on the GPU"});
}

TEST_F(UserToolTest, AKernelItDoesNotHaveIsNamedWithTheOnesItHas) {
  for (const char* command : {"emit", "model", "tune"})
    expect_my_kiln_error(my_kiln({command, "matmul"}),
                         {"no kernel named 'matmul'; known kernels: layernorm"});
  expect_my_kiln_error(my_kiln({"emit", "layernorm", "--set", "BLOCK_M=64"}),
                       {"kernel 'layernorm' has no parameter 'BLOCK_M'", "ROWS, BLOCK_N"});
  expect_my_kiln_error(my_kiln({"frobnicate"}),
                       {"unknown subcommand 'frobnicate'", "(see 'my_kiln --help')"});
  ToolRun help = my_kiln({"--help"});
  EXPECT_EQ(help.rc, 0);
  EXPECT_NE(help.out.find("my_kiln <subcommand> --help"), std::string::npos) << help.out;
}

} // namespace
} // namespace kiln
