// The command line refuses bad parameters, numbers, sizes and environment variables before any work, naming
// the flag, parameter or variable, what it takes and what came (issue 20): `kiln` run as a process in the
// interpreter (KILN_TOOL_PATH).
#include "cli_test_fixture.h"
#include "support/npy.h"

#include <gtest/gtest.h>
#include <llvm/Support/raw_ostream.h>

#include <chrono>
#include <cmath>
#include <limits>

namespace kiln {
namespace {

using testing_support::CliTest;
using testing_support::ToolRun;

// `kiln attention --interpret` on a 1 x 1 x 16 x 16 problem, with `extra` arguments.
std::vector<std::string> attention(std::vector<std::string> extra) {
  std::vector<std::string> args = {"attention", "--interpret", "--batch", "1",          "--heads",
                                   "1",         "--seq-q",     "16",      "--head-dim", "16"};
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

// ---- kernel parameters (--set), before any work ----

TEST_F(CliTest, AttentionTileOfZeroIsAnErrorNotADivisionByZero) {
  expect_error(kiln(attention({"--set", "BLOCK_M=0"})), {"BLOCK_M=0", "a power of two from 16 to 256"});
}

TEST_F(CliTest, EmitRefusesATileBeyondItsRangeAtOnce) {
  const auto start = std::chrono::steady_clock::now();
  expect_error(kiln({"emit", "fa2_fwd", "--stage", "ptx", "--set", "BLOCK_M=1048576"}),
               {"BLOCK_M=1048576", "from 16 to 256"});
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(20));
}

TEST_F(CliTest, EmitRefusesParametersOutsideTheirKinds) {
  expect_error(kiln({"emit", "fa2_fwd", "--set", "MIN_BLOCKS_PER_SM=-3"}),
               {"MIN_BLOCKS_PER_SM=-3", "an integer from 1 to 32"});
  expect_error(kiln({"emit", "fa2_fwd", "--set", "MASK_EVERY_TILE=5"}), {"MASK_EVERY_TILE=5", "0 or 1"});
  expect_error(kiln({"emit", "fa2_fwd", "--set", "K_TRANSPOSED=-1"}), {"K_TRANSPOSED=-1", "0 or 1"});
  expect_error(kiln({"emit", "fa2_fwd", "--set", "HEAD_DIM=512"}), {"HEAD_DIM=512", "from 16 to 256"});
}

TEST_F(CliTest, EmitRefusesTilesBeyondTheArchsSharedMemory) {
  expect_error(kiln({"emit", "fa2_fwd", "--arch", "sm_80", "--set",
                     "BLOCK_M=256,BLOCK_N=256,HEAD_DIM=256,DTYPE=2,num_stages=3"}),
               {"bytes of shared memory", "sm_80 allows at most 166912 per block", "BLOCK_M=256"});
}

TEST_F(CliTest, ModelAndTuneCheckParametersToo) {
  expect_error(kiln({"model", "vector_add", "--shape", "n=4096", "--set", "BLOCK=0"}),
               {"BLOCK=0", "a power of two"});
  expect_error(kiln({"tune", "matmul", "--shape", "M=64,N=64,K=64", "--set", "TF32=7"}),
               {"TF32=7", "0 or 1"});
}

TEST_F(CliTest, ListShowsWhatEachParameterTakes) {
  ToolRun r = kiln({"list"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("query rows per tile [a power of two from 16 to 256]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[0 or 1]"), std::string::npos) << r.out;
}

// ---- numbers are base 10 ----

TEST_F(CliTest, LeadingZerosAreDecimalNotOctal) {
  ToolRun r = kiln(attention({"--seq-k", "016"}));
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("N_K16"), std::string::npos) << r.out;
  r = kiln({"attention", "--interpret", "--batch", "1", "--heads", "1", "--seq-q", "8", "--head-dim", "09"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("D9"), std::string::npos) << r.out;
  r = kiln({"emit", "vector_add", "--stage", "ir", "--set", "BLOCK=0256"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("BLOCK=256"), std::string::npos) << r.out;
}

TEST_F(CliTest, NumbersThatAreNotBaseTenNameTheirFlag) {
  expect_error(kiln(attention({"--seq-k", "0x10"})), {"--seq-k", "base-10 integer", "'0x10'"});
  expect_error(kiln(attention({"--seed", "-1"})), {"--seed", "'-1'"});
  expect_error(kiln({"emit", "vector_add", "--set", "BLOCK=0x100"}), {"--set", "base-10", "BLOCK=0x100"});
  expect_error(kiln({"model", "vector_add", "--shape", "n=0x10"}), {"--shape", "base-10", "n=0x10"});
}

// ---- problem sizes ----

TEST_F(CliTest, ModelRefusesProblemsTheKernelsCannotRun) {
  const std::string sizes = "B=1,H=4,N_Q=128,N_K=128";
  expect_error(kiln({"model", "fa2_fwd", "--shape", sizes + ",H_KV=0,D=64"}), {"H_KV=0", "from 1 to"});
  expect_error(kiln({"model", "fa2_fwd", "--shape", sizes + ",H_KV=3,D=64"}), {"H=4", "multiple of H_KV=3"});
  expect_error(kiln({"model", "fa2_fwd", "--shape", sizes + ",H_KV=4,D=0"}), {"D=0"});
  expect_error(kiln({"model", "fa2_fwd", "--shape", "B=1,H=4,H_KV=4,N_Q=-5,N_K=128,D=64"}), {"N_Q=-5"});
  expect_error(kiln({"model", "fa2_fwd", "--shape", "B=4096,H=32,H_KV=32,N_Q=128,N_K=128,D=64"}),
               {"B * H = 4096 * 32 = 131072 exceeds 65535", "grid"});
  expect_error(kiln({"model", "matmul", "--shape", "M=2147483647,N=2147483647,K=64"}),
               {"kernel 'matmul'", "grid", "CUDA allows 1 to 2147483647"});
}

TEST_F(CliTest, AttentionRefusesSizesWhoseProductOverflows) {
  expect_error(kiln({"attention", "--interpret", "--batch", "1073741824", "--heads", "1073741824", "--seq-q",
                     "16", "--head-dim", "16"}),
               {"B * H = 1073741824 * 1073741824", "exceeds 65535"});
}

// ---- environment ----

TEST_F(CliTest, BadEnvironmentVariablesAreErrorsNamingThem) {
  expect_error(kiln(attention({}), {{"KILN_INTERPRET", "2"}}), {"KILN_INTERPRET", "'2'", "0, 1"});
  expect_error(kiln({"emit", "vector_add"}, {{"KILN_LOG", "garbage"}}), {"KILN_LOG", "'garbage'", "passes"});
}

// A variable the command does not read is still checked: the interpreter reads neither KILN_AUTOTUNE nor
// KILN_DEVICE, `kiln list` reads none of them, and each used to ignore a bad value.
TEST_F(CliTest, BadEnvironmentVariablesAreErrorsInEveryCommand) {
  expect_error(kiln(attention({}), {{"KILN_AUTOTUNE", "sometimes"}}),
               {"KILN_AUTOTUNE", "'sometimes'", "off, cached, on, force"});
  expect_error(kiln(attention({}), {{"KILN_DEVICE", "abc"}}), {"KILN_DEVICE", "'abc'", "device ordinal"});
  expect_error(kiln({"list"}, {{"KILN_INTERPRET", "garbage"}}), {"KILN_INTERPRET", "'garbage'"});
  expect_error(kiln({"cache", "path"}, {{"KILN_LOG", "all"}}), {"KILN_LOG", "'all'", "passes"});
  ToolRun r = kiln(attention({}), {{"KILN_AUTOTUNE", "force"}, {"KILN_DEVICE", "0"}, {"KILN_LOG", ""}});
  EXPECT_EQ(r.rc, 0) << r.err; // accepted values, and an empty one (the default), still run
}

// ---- --check on inputs that are not finite ----

TEST_F(CliTest, CheckOnNonFiniteInputsSaysSo) {
  std::vector<double> q(16 * 16, 0.5);
  q[3] = std::numeric_limits<double>::quiet_NaN();
  q[40] = std::numeric_limits<double>::infinity();
  std::vector<double> kv(16 * 16, 0.25);
  for (auto [name, values] : {std::pair{"q.npy", &q}, {"k.npy", &kv}, {"v.npy", &kv}}) {
    std::error_code ec;
    llvm::raw_fd_ostream os(path(name), ec);
    ASSERT_FALSE(ec) << ec.message();
    os << serialize_npy(DType::f32, {1, 1, 16, 16}, *values);
  }
  ToolRun r = kiln(attention({"--q", path("q.npy"), "--k", path("k.npy"), "--v", path("v.npy"), "--check"}));
  EXPECT_NE(r.out.find("the inputs are not all finite: Q holds 1 NaN and 1 infinite of 256 elements"),
            std::string::npos)
      << r.out << r.err;
  if (r.rc != 0) { // a mismatch on those values names them in the failure too
    EXPECT_NE(r.err.find("the inputs are not all finite"), std::string::npos) << r.err;
  }
}

// A NaN in V at key 10, which causal rows 0..9 do not see, in the one key tile their program visits: by
// default it reaches them (0 · NaN, as in FlashAttention) and the check, whose reference selects, fails and
// says why;
// --exact-masked-v selects, and the check passes.
TEST_F(CliTest, HiddenNonFiniteValueFailsTheCheckUnlessExact) {
  std::vector<double> qk(16 * 16, 0.5), v(16 * 16, 0.25);
  v[10 * 16 + 3] = std::numeric_limits<double>::quiet_NaN();
  for (auto [name, values] : {std::pair{"q.npy", &qk}, {"k.npy", &qk}, {"v.npy", &v}}) {
    std::error_code ec;
    llvm::raw_fd_ostream os(path(name), ec);
    ASSERT_FALSE(ec) << ec.message();
    os << serialize_npy(DType::f32, {1, 1, 16, 16}, *values);
  }
  const std::vector<std::string> args = {"--q",         path("q.npy"), "--k",      path("k.npy"), "--v",
                                         path("v.npy"), "--check",     "--causal", "top-left"};
  ToolRun plain = kiln(attention(args));
  EXPECT_NE(plain.rc, 0) << plain.out;
  EXPECT_NE(plain.out.find("--exact-masked-v selects exactly"), std::string::npos) << plain.out;
  std::vector<std::string> exact_args = args;
  exact_args.push_back("--exact-masked-v");
  ToolRun exact = kiln(attention(exact_args));
  EXPECT_EQ(exact.rc, 0) << exact.out << exact.err;
  EXPECT_NE(exact.out.find("exact-masked-v"), std::string::npos) << "the problem line names the mode\n"
                                                                 << exact.out;
  EXPECT_EQ(exact.out.find("--exact-masked-v selects exactly"), std::string::npos) << exact.out;
}

} // namespace
} // namespace kiln
