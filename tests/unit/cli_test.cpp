// The `kiln` command line, run as a process (KILN_TOOL_PATH): option parsing and errors of every
// subcommand, emit at every stage that needs no GPU, attention with .npy inputs/outputs in the
// interpreter, bad files rejected with nothing written, the model's numbers, cache and demo.
#include "kernels/attention/attention_bwd_problem.h"
#include "kernels/attention/attention_bwd_tolerance.h"
#include "kernels/attention/attention_problem.h"
#include "kernels/compare.h"
#include "kiln_tool_run.h"
#include "runtime/cuda_driver.h"
#include "runtime/nvrtc.h"
#include "support/npy.h"

#include <gtest/gtest.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/JSON.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Path.h>
#include <llvm/Support/Program.h>

#include <bit>
#include <cstdlib>
#include <map>
#include <random>

namespace kiln {
namespace {

using testing_support::slurp;
using testing_support::ToolRun;

class CliTest : public ::testing::Test {
protected:
  void SetUp() override { ASSERT_FALSE(llvm::sys::fs::createUniqueDirectory("kiln-cli-test", dir_)); }
  void TearDown() override { llvm::sys::fs::remove_directories(dir_); }

  std::string path(const std::string& name) const { return (dir_ + "/" + name).str(); }

  // Runs kiln with `args`; the environment is this process's without KILN_INTERPRET, plus `env`.
  ToolRun kiln(const std::vector<std::string>& args, const std::map<std::string, std::string>& env = {}) {
    return testing_support::run_kiln(dir_.str().str(), args, env);
  }

  // Expects exit code 1 and a "kiln: error: " line containing every substring.
  void expect_error(const ToolRun& r, std::initializer_list<const char*> substrings) {
    testing_support::expect_kiln_error(r, substrings);
  }

  llvm::SmallString<128> dir_;
};

// ---- the command itself ----

TEST_F(CliTest, NoSubcommandUnknownSubcommandAndUnknownOption) {
  expect_error(kiln({}), {"no subcommand given", "attention"});
  expect_error(kiln({"frobnicate"}), {"unknown subcommand 'frobnicate'", "emit"});
  expect_error(kiln({"list", "--bogus"}), {"bogus"});
}

// `kiln tune` takes any registered kernel: everything it can check (names, sizes, the launch plan) is checked
// before it looks for a GPU, so these errors are the same with or without one.
TEST_F(CliTest, TuneParsesAnyKernelsProblemBeforeNeedingAGpu) {
  expect_error(kiln({"tune", "nosuch"}), {"no kernel named 'nosuch'", "matmul", "vector_add"});
  expect_error(kiln({"tune", "matmul", "--seq-q", "64", "--head-dim", "64"}),
               {"describe an attention problem for fa2_fwd", "sizes of 'matmul'", "M, N, K"});
  expect_error(kiln({"tune", "matmul", "--shape", "M=64"}),
               {"needs --shape values for N, K", "M=...,N=...,K=..."});
  expect_error(kiln({"tune", "matmul", "--shape", "M=64,N=64,K=64,Z=1"}),
               {"no parameter, size or scalar argument 'Z'", "BLOCK_M", "stride_am"});
  expect_error(kiln({"tune", "matmul", "--shape", "M=64,N=64,K=64", "--set", "BLOCKM=64"}),
               {"no parameter, size or scalar argument 'BLOCKM'"});
  expect_error(kiln({"tune", "matmul", "--shape", "M=64,N=64,K=64", "--set", "M=32"}),
               {"M is given twice, as 64 (--shape) and 32 (--set)"});
  expect_error(kiln({"tune", "matmul", "--shape", "M=64,N=x,K=64"}), {"--shape expects NAME=VALUE"});
  // Strides of block pointers are derived; those of pointer tensors must be given.
  expect_error(kiln({"tune", "softmax", "--shape", "n_rows=8,n_cols=100"}),
               {"kernel 'softmax' needs a value for its integer arguments in_row_stride, out_row_stride"});
  // fa2_fwd: the attention flags or --shape, not both; tiles are what it tunes.
  expect_error(kiln({"tune", "fa2_fwd", "--head-dim", "64"}), {"needs --seq-q and --head-dim"});
  expect_error(kiln({"tune", "fa2_fwd", "--shape", "B=1,H=2"}),
               {"needs --shape values for H_KV, N_Q, N_K, D"});
  expect_error(kiln({"tune", "fa2_fwd", "--seq-q", "64", "--shape", "B=1,H=1,H_KV=1,N_Q=64,N_K=64,D=64"}),
               {"not both"});
  expect_error(
      kiln({"tune", "fa2_fwd", "--shape", "B=1,H=1,H_KV=1,N_Q=64,N_K=64,D=64", "--set", "BLOCK_M=64"}),
      {"chooses BLOCK_M itself"});
  expect_error(kiln({"tune", "fa2_fwd", "--seq-q", "64", "--head-dim", "12"}), {"D"});
  std::string why;
  if (!rt::driver_available(&why)) {
    for (std::vector<std::string> args :
         {std::vector<std::string>{"tune", "fa2_fwd", "--seq-q", "256", "--head-dim", "64"},
          {"tune", "fa2_fwd", "--shape", "B=1,H=2,H_KV=1,N_Q=256,N_K=128,D=64"},
          {"tune", "matmul", "--shape", "M=256,N=256,K=256", "--set", "DTYPE=1"},
          {"tune", "vector_add", "--shape", "n=100000"},
          {"tune", "fa1_fwd", "--shape", "B=1,H=1,H_KV=1,N_Q=64,N_K=64,D=64"},
          {"tune", "softmax", "--shape", "n_rows=8,n_cols=100,in_row_stride=100,out_row_stride=128"}})
      expect_error(kiln(args), {"no CUDA driver found", "kiln tune times every candidate on the GPU"});
  }
}

TEST_F(CliTest, VersionAndHelp) {
  ToolRun v = kiln({"--version"});
  EXPECT_EQ(v.rc, 0);
  EXPECT_NE(v.out.find("kiln 0."), std::string::npos) << v.out;
  ToolRun h = kiln({"--help"});
  EXPECT_EQ(h.rc, 0);
  for (const char* sub :
       {"info", "list", "emit", "attention", "compare-loads", "cache", "model", "demo", "tune"})
    EXPECT_NE(h.out.find(sub), std::string::npos) << sub;
  ToolRun eh = kiln({"emit", "--help"});
  EXPECT_EQ(eh.rc, 0);
  EXPECT_NE(eh.out.find("--stage"), std::string::npos);
}

TEST_F(CliTest, InfoReportsNvrtcAndDriver) {
  ToolRun r = kiln({"info"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("kiln "), std::string::npos);
  EXPECT_NE(r.out.find("NVRTC:"), std::string::npos);
  if (!rt::driver_available()) {
    EXPECT_NE(r.out.find("driver: none: no CUDA driver found"), std::string::npos) << r.out;
  }
  ToolRun j = kiln({"info", "--json"});
  ASSERT_EQ(j.rc, 0);
  auto v = llvm::json::parse(j.out);
  ASSERT_TRUE(bool(v)) << j.out;
  EXPECT_TRUE(v->getAsObject()->getString("kiln_version").hasValue());
  EXPECT_NE(v->getAsObject()->getArray("gpus"), nullptr);
}

TEST_F(CliTest, ListShowsEveryKernelWithParams) {
  ToolRun r = kiln({"list", "--json"});
  ASSERT_EQ(r.rc, 0) << r.err;
  auto v = llvm::json::parse(r.out);
  ASSERT_TRUE(bool(v)) << r.out;
  bool fa2 = false;
  for (const llvm::json::Value& k : *v->getAsArray()) {
    const llvm::json::Object& o = *k.getAsObject();
    EXPECT_GT(o.getInteger("config_space_size").getValueOr(0), 0);
    if (o.getString("name") == llvm::StringRef("fa2_fwd")) {
      fa2 = true;
      EXPECT_GE(o.getArray("params")->size(), 6u);
      EXPECT_GE(o.getArray("tuning_key")->size(), 1u);
    }
  }
  EXPECT_TRUE(fa2);
  ToolRun t = kiln({"list"});
  EXPECT_NE(t.out.find("BLOCK_M"), std::string::npos);
  EXPECT_NE(t.out.find("tuning key"), std::string::npos);
}

// ---- emit ----

TEST_F(CliTest, EmitIrLoweredCuda) {
  ToolRun ir = kiln({"emit", "fa2_fwd", "--stage", "ir", "--set", "BLOCK_M=64,BLOCK_N=32"});
  ASSERT_EQ(ir.rc, 0) << ir.err;
  EXPECT_NE(ir.out.find("kernel @fa2_fwd"), std::string::npos);
  EXPECT_NE(ir.out.find("BLOCK_M=64 BLOCK_N=32"), std::string::npos);
  ToolRun low = kiln({"emit", "matmul", "--stage=lowered", "--arch", "sm_80"});
  ASSERT_EQ(low.rc, 0) << low.err;
  EXPECT_NE(low.out.find("kernel @matmul"), std::string::npos);
  EXPECT_NE(low.out.find("lowered matmul"), std::string::npos);
  const std::string file = path("k.cu");
  ToolRun cu = kiln({"emit", "vector_add", "--stage", "cuda", "-o", file});
  ASSERT_EQ(cu.rc, 0) << cu.err;
  EXPECT_TRUE(cu.out.empty());
  EXPECT_NE(slurp(file).find("__global__"), std::string::npos);
}

TEST_F(CliTest, EmitPtxWithResourceUsage) {
  std::string why;
  if (!rt::nvrtc_available(&why))
    GTEST_SKIP() << "NVRTC not available: " << why;
  ToolRun r = kiln({"emit", "vector_add", "--stage", "ptx", "--arch", "sm_80"});
  ASSERT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find(".entry"), std::string::npos);
  EXPECT_NE(r.out.find(".target sm_80"), std::string::npos);
  EXPECT_NE(r.err.find("registers"), std::string::npos) << r.err;
}

TEST_F(CliTest, EmitSassNeedsCuobjdump) {
  std::string why;
  if (!rt::nvrtc_available(&why))
    GTEST_SKIP() << "NVRTC not available: " << why;
  ToolRun r = kiln({"emit", "vector_add", "--stage", "sass", "--arch", "sm_90a"},
                   {{"PATH", "/nonexistent"}, {"CUDA_HOME", "/nonexistent"}});
  if (llvm::sys::fs::exists("/usr/local/cuda/bin/cuobjdump")) {
    EXPECT_EQ(r.rc, 0) << r.err; // found in the default CUDA location
    EXPECT_NE(r.out.find("vector_add"), std::string::npos);
  } else {
    expect_error(r, {"cuobjdump", "--stage ptx"});
  }
}

TEST_F(CliTest, EmitErrors) {
  expect_error(kiln({"emit", "nope"}), {"no kernel named 'nope'", "fa2_fwd"});
  expect_error(kiln({"emit", "fa2_fwd", "--set", "FOO=1"}), {"no parameter 'FOO'", "BLOCK_M"});
  expect_error(kiln({"emit", "fa2_fwd", "--set", "BLOCK_M"}), {"--set expects NAME=VALUE"});
  expect_error(kiln({"emit", "fa2_fwd", "--set", "BLOCK_M=big"}), {"--set expects NAME=VALUE"});
  expect_error(kiln({"emit", "fa2_fwd", "--stage", "asm"}), {"--stage must be one of", "'asm'"});
  expect_error(kiln({"emit", "fa2_fwd", "--arch", "sm_70"}), {"sm_70"});
  expect_error(kiln({"emit"}), {"positional"});
  expect_error(kiln({"emit", "fa2_fwd", "--set", "BLOCK_M=48", "--stage", "ir"}), {"BLOCK_M"});
}

// ---- attention ----

struct Shape4 {
  int64_t B = 1, H = 2, N = 80, D = 32;
};

// Random f64 values written as `t` in [B, H, N, D] (or [B, N, H, D]) order.
std::vector<double> write_tensor(const std::string& file, DType t, const std::vector<int64_t>& shape,
                                 uint64_t seed) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(-1.0, 1.0);
  std::vector<double> v(static_cast<size_t>(n));
  for (double& x : v)
    x = dist(rng);
  write_file_atomically(file, serialize_npy(t, shape, v));
  return v;
}

TEST_F(CliTest, AttentionInterpretedWithNpyInputsMatchesReference) {
  for (const char* layout : {"bhsd", "bshd"})
    for (DType in_t : {DType::f32, DType::f64, DType::f16}) {
      SCOPED_TRACE(std::string(layout) + " inputs " + std::string(dtype_name(in_t)));
      const bool bshd = std::string(layout) == "bshd";
      AttentionProblem p;
      p.B = 1, p.H = 2, p.H_KV = 2, p.N_Q = 80, p.N_K = 48, p.D = 32, p.bshd_layout = bshd, p.causal = 1;
      auto shape = [&](int64_t n) {
        return bshd ? std::vector<int64_t>{p.B, n, p.H, p.D} : std::vector<int64_t>{p.B, p.H, n, p.D};
      };
      std::vector<double> q = write_tensor(path("q.npy"), in_t, shape(p.N_Q), 1);
      std::vector<double> k = write_tensor(path("k.npy"), in_t, shape(p.N_K), 2);
      std::vector<double> v = write_tensor(path("v.npy"), in_t, shape(p.N_K), 3);
      ToolRun r = kiln(
          {"attention",   "--batch=1",         "--heads=2",   "--seq-q=80",  "--seq-k=48", "--head-dim=32",
           "--dtype=f16", "--causal=top-left", "--layout",    layout,        "--q",        path("q.npy"),
           "--k",         path("k.npy"),       "--v",         path("v.npy"), "--out",      path("o.npy"),
           "--lse",       path("lse.npy"),     "--interpret", "--check"});
      ASSERT_EQ(r.rc, 0) << r.out << r.err;
      EXPECT_NE(r.out.find("check O:"), std::string::npos);
      EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;

      // The written O against a reference computed here from the same inputs rounded to f16.
      AttentionInputs in{HostBuffer(DType::f16, q_numel(p)), HostBuffer(DType::f16, kv_numel(p)),
                         HostBuffer(DType::f16, kv_numel(p))};
      for (size_t i = 0; i < q.size(); ++i)
        in.q.set(static_cast<int64_t>(i), round_exactly_to(round_exactly_to(q[i], in_t), DType::f16));
      for (size_t i = 0; i < k.size(); ++i) {
        in.k.set(static_cast<int64_t>(i), round_exactly_to(round_exactly_to(k[i], in_t), DType::f16));
        in.v.set(static_cast<int64_t>(i), round_exactly_to(round_exactly_to(v[i], in_t), DType::f16));
      }
      AttentionResult ref = reference(p, in);
      NpyArray o = read_npy(path("o.npy"));
      EXPECT_EQ(o.shape, shape(p.N_Q));
      EXPECT_EQ(o.descr(), "<f4");
      // Back to logical [B, H, N, D] order for the comparison.
      std::vector<double> logical(o.values.size());
      for (int64_t h = 0; h < p.H; ++h)
        for (int64_t n = 0; n < p.N_Q; ++n)
          for (int64_t d = 0; d < p.D; ++d)
            logical[static_cast<size_t>((h * p.N_Q + n) * p.D + d)] =
                o.values[static_cast<size_t>(bshd ? (n * p.H + h) * p.D + d : (h * p.N_Q + n) * p.D + d)];
      EXPECT_TRUE(compare_to_reference(logical, ref.o).ok(tolerance(DType::f16)));
      NpyArray lse = read_npy(path("lse.npy"));
      EXPECT_EQ(lse.shape, (std::vector<int64_t>{1, 2, 80}));
      EXPECT_TRUE(compare_to_reference(lse.values, ref.lse).ok(tolerance(DType::f16)));
    }
}

TEST_F(CliTest, AttentionRandomInputsOutDtypeAndGqa) {
  ToolRun r =
      kiln({"attention", "--batch", "2",          "--heads", "4",           "--kv-heads",  "2",
            "--seq-q",   "40",      "--head-dim", "48",      "--dtype",     "bf16",        "--interpret",
            "--check",   "--seed",  "9",          "--out",   path("o.npy"), "--out-dtype", "f16"});
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
  NpyArray o = read_npy(path("o.npy"));
  EXPECT_EQ(o.descr(), "<f2");
  EXPECT_EQ(o.shape, (std::vector<int64_t>{2, 4, 40, 48}));
  for (double x : o.values)
    ASSERT_TRUE(std::isfinite(x));
  // The same seed gives the same output.
  ToolRun again =
      kiln({"attention", "--batch", "2",          "--heads",      "4",           "--kv-heads", "2",
            "--seq-q",   "40",      "--head-dim", "48",           "--dtype",     "bf16",       "--interpret",
            "--seed",    "9",       "--out",      path("o2.npy"), "--out-dtype", "f16"});
  ASSERT_EQ(again.rc, 0);
  EXPECT_EQ(slurp(path("o.npy")), slurp(path("o2.npy")));
  expect_error(kiln({"attention", "--batch=1", "--heads=1", "--seq-q=16", "--head-dim=16", "--interpret",
                     "--out", path("x.npy"), "--out-dtype", "bf16"}),
               {"--out-dtype", "bfloat16"});
}

// The interpreter runs the default config (or --set's): the autotuner times candidates on the GPU only, so
// KILN_AUTOTUNE does not change an interpreted run.
TEST_F(CliTest, AttentionSaysWhereItsConfigCameFrom) {
  const std::vector<std::string> args = {"attention",     "--batch=1",   "--heads=1", "--seq-q=24",
                                         "--head-dim=16", "--interpret", "--check"};
  ToolRun plain = kiln(args, {{"KILN_AUTOTUNE", "force"}});
  ASSERT_EQ(plain.rc, 0) << plain.out << plain.err;
  EXPECT_NE(plain.out.find("on the interpreter (BLOCK_M=128 BLOCK_N=64"), std::string::npos) << plain.out;
  EXPECT_NE(plain.out.find("; the default config)"), std::string::npos) << plain.out;
  std::vector<std::string> with_set = args;
  with_set.insert(with_set.end(), {"--set", "BLOCK_M=16,BLOCK_N=16"});
  ToolRun set = kiln(with_set);
  ASSERT_EQ(set.rc, 0) << set.out << set.err;
  EXPECT_NE(set.out.find("BLOCK_M=16 BLOCK_N=16"), std::string::npos) << set.out;
  EXPECT_NE(set.out.find("; the default config with --set)"), std::string::npos) << set.out;
  EXPECT_EQ(set.out.find("FAIL"), std::string::npos) << set.out;
}

TEST_F(CliTest, AttentionBigEndianAndFortranInputsGiveTheSameOutput) {
  const std::vector<int64_t> shape{1, 1, 32, 16};
  std::vector<double> q = write_tensor(path("q.npy"), DType::f32, shape, 4);
  write_tensor(path("k.npy"), DType::f32, shape, 5);
  write_tensor(path("v.npy"), DType::f32, shape, 6);
  auto run = [&](const std::string& qfile, const std::string& out) {
    return kiln({"attention", "--batch=1", "--heads=1", "--seq-q=32", "--head-dim=16", "--interpret", "--q",
                 qfile, "--k", path("k.npy"), "--v", path("v.npy"), "--out", out});
  };
  ASSERT_EQ(run(path("q.npy"), path("o_le.npy")).rc, 0);

  // The same Q big-endian, and in Fortran order.
  std::string le = slurp(path("q.npy"));
  const size_t data = le.size() - q.size() * 4;
  std::string header = le.substr(0, data);
  std::string be = header;
  be.replace(be.find("'<f4'"), 5, "'>f4'");
  for (size_t i = 0; i < q.size(); ++i) {
    std::string word = le.substr(data + i * 4, 4);
    be += std::string(word.rbegin(), word.rend());
  }
  write_file_atomically(path("q_be.npy"), be);
  std::string fo = header;
  fo.replace(fo.find("False"), 5, "True ");
  for (int64_t d = 0; d < 16; ++d) // Fortran order: the first index fastest
    for (int64_t n = 0; n < 32; ++n)
      fo += le.substr(data + static_cast<size_t>(n * 16 + d) * 4, 4);
  write_file_atomically(path("q_f.npy"), fo);

  ToolRun rb = run(path("q_be.npy"), path("o_be.npy"));
  ASSERT_EQ(rb.rc, 0) << rb.err;
  ToolRun rf = run(path("q_f.npy"), path("o_f.npy"));
  ASSERT_EQ(rf.rc, 0) << rf.err;
  EXPECT_EQ(slurp(path("o_le.npy")), slurp(path("o_be.npy")));
  EXPECT_EQ(slurp(path("o_le.npy")), slurp(path("o_f.npy")));
}

TEST_F(CliTest, AttentionBadFilesAreRejectedAndNothingIsWritten) {
  const std::vector<int64_t> shape{1, 1, 32, 16};
  write_tensor(path("q.npy"), DType::f32, shape, 7);
  write_tensor(path("k.npy"), DType::f32, shape, 8);
  write_tensor(path("v.npy"), DType::f32, shape, 9);
  const std::string out = path("out.npy"), lse = path("lse.npy");
  auto run = [&](const std::string& qfile) {
    return kiln({"attention", "--batch=1", "--heads=1", "--seq-q=32", "--head-dim=16", "--interpret", "--q",
                 qfile, "--k", path("k.npy"), "--v", path("v.npy"), "--out", out, "--lse", lse});
  };
  auto nothing_written = [&] {
    EXPECT_FALSE(llvm::sys::fs::exists(out));
    EXPECT_FALSE(llvm::sys::fs::exists(lse));
    std::error_code ec;
    for (llvm::sys::fs::directory_iterator it(dir_, ec), end; !ec && it != end; it.increment(ec))
      EXPECT_EQ(std::string(it->path()).find(".tmp-"), std::string::npos) << it->path();
  };

  // int32 data
  {
    std::string bytes = serialize_npy(DType::f32, shape, std::vector<double>(512, 1.0));
    bytes.replace(bytes.find("'<f4'"), 5, "'<i4'");
    write_file_atomically(path("q_i32.npy"), bytes);
  }
  expect_error(run(path("q_i32.npy")), {"q_i32.npy", "int32", "not supported for attention inputs"});
  nothing_written();

  // wrong shape
  write_tensor(path("q_shape.npy"), DType::f32, {1, 1, 31, 16}, 10);
  expect_error(run(path("q_shape.npy")), {"q_shape.npy", "(1, 1, 31, 16)", "(1, 1, 32, 16)"});
  nothing_written();

  // truncated
  std::string good = slurp(path("q.npy"));
  write_file_atomically(path("q_trunc.npy"), good.substr(0, good.size() - 100));
  expect_error(run(path("q_trunc.npy")), {"q_trunc.npy", "truncated"});
  nothing_written();

  // not .npy at all
  write_file_atomically(path("q_text.npy"), "this is not numpy data\n");
  expect_error(run(path("q_text.npy")), {"not an .npy file"});
  nothing_written();

  // missing file, only some inputs
  expect_error(run(path("missing.npy")), {"missing.npy"});
  expect_error(kiln({"attention", "--batch=1", "--heads=1", "--seq-q=32", "--head-dim=16", "--interpret",
                     "--q", path("q.npy")}),
               {"--q, --k and --v go together"});
  nothing_written();
}

TEST_F(CliTest, AttentionRefusesToOverwriteAnInput) {
  const std::vector<int64_t> shape{1, 1, 16, 16};
  write_tensor(path("q.npy"), DType::f32, shape, 11);
  write_tensor(path("k.npy"), DType::f32, shape, 12);
  write_tensor(path("v.npy"), DType::f32, shape, 13);
  const std::string before = slurp(path("k.npy"));
  expect_error(
      kiln({"attention", "--batch=1", "--heads=1", "--seq-q=16", "--head-dim=16", "--interpret", "--q",
            path("q.npy"), "--k", path("k.npy"), "--v", path("v.npy"), "--out", path("k.npy")}),
      {"refusing to overwrite the input"});
  EXPECT_EQ(slurp(path("k.npy")), before);
  expect_error(
      kiln({"attention", "--batch=1", "--heads=1", "--seq-q=16", "--head-dim=16", "--interpret", "--q",
            path("q.npy"), "--k", path("k.npy"), "--v", path("v.npy"), "--lse", (dir_ + "/./q.npy").str()}),
      {"refusing to overwrite the input"});
}

TEST_F(CliTest, AttentionOptionErrors) {
  expect_error(kiln({"attention", "--heads=1", "--seq-q=16", "--head-dim=16", "--interpret"}), {"--batch"});
  expect_error(kiln({"attention", "--batch=x", "--heads=1", "--seq-q=16", "--head-dim=16", "--interpret"}),
               {"batch"});
  const std::vector<std::string> base = {"attention",  "--batch=1",     "--heads=2",
                                         "--seq-q=16", "--head-dim=16", "--interpret"};
  auto with = [&](std::initializer_list<std::string> extra) {
    std::vector<std::string> a = base;
    a.insert(a.end(), extra);
    return kiln(a);
  };
  expect_error(with({"--causal=diagonal"}),
               {"--causal must be none, top-left or bottom-right", "'diagonal'"});
  expect_error(with({"--dtype=f8"}), {"--dtype must be f16, bf16 or f32"});
  expect_error(with({"--layout=sbhd"}), {"--layout must be bhsd or bshd"});
  expect_error(with({"--k-load=column"}), {"--k-load must be transposed or row-major"});
  expect_error(with({"--kv-heads=3"}), {"multiple of H_KV=3"});
  expect_error(kiln({"attention", "--batch=1", "--heads=1", "--seq-q=16", "--head-dim=512", "--interpret"}),
               {"exceeds 256"});
  expect_error(with({"--head-dim=32"}), {"--head-dim", "one time"}); // given twice
  expect_error(with({"--bench"}), {"--bench", "--interpret"});
  expect_error(with({"--set", "BLOCK_M=100"}), {"BLOCK_M"});
}

TEST_F(CliTest, AttentionWithoutGpuSuggestsInterpret) {
  if (rt::driver_available())
    GTEST_SKIP() << "a CUDA driver is installed; this checks the message where none is";
  expect_error(kiln({"attention", "--batch=1", "--heads=1", "--seq-q=16", "--head-dim=16"}),
               {"no CUDA driver found", "--interpret"});
  // KILN_INTERPRET=1 runs in the interpreter instead.
  ToolRun r = kiln({"attention", "--batch=1", "--heads=1", "--seq-q=16", "--head-dim=16", "--check"},
                   {{"KILN_INTERPRET", "1"}});
  EXPECT_EQ(r.rc, 0) << r.err;
  EXPECT_NE(r.out.find("interpreter"), std::string::npos);
}

// ---- attention --backward ----

// Random inputs (the tool's seeds: inputs from --seed, dO from --seed + 1), GQA, bshd, bottom-right causal
// with rows that see no key: every gradient checked by the tool, and the written dK, dV, dQ held to the
// reference computed here.
TEST_F(CliTest, AttentionBackwardInterpretedChecksAndWritesGradients) {
  AttentionProblem p;
  p.B = 1, p.H = 4, p.H_KV = 2, p.N_Q = 40, p.N_K = 24, p.D = 32, p.causal = 2, p.bshd_layout = true;
  ToolRun r = kiln({"attention", "--batch=1", "--heads=4", "--kv-heads=2", "--seq-q=40", "--seq-k=24",
                    "--head-dim=32", "--causal=bottom-right", "--layout=bshd", "--seed=3", "--backward",
                    "--interpret", "--check", "--dq", path("dq.npy"), "--dk", path("dk.npy"), "--dv",
                    path("dv.npy")});
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  for (const char* line :
       {"fa2 backward", "on the interpreter (deterministic", "check dQ:", "check dK:", "check dV:"})
    EXPECT_NE(r.out.find(line), std::string::npos) << line << "\n" << r.out;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;

  const AttentionInputs in = make_inputs(p, 3, 1.0);
  const AttentionGrads ref = reference_backward(p, logical_bwd_tensors(p, in, make_dout(p, 4, 1.0)));
  const double tol = attention_grad_tolerance(p.dtype, false, max_abs_lse(p, in));
  const AttentionStrides s = attention_strides(p);
  auto logical = [&](const std::string& file, int64_t heads, int64_t n, const TensorStrides& st) {
    NpyArray a = read_npy(path(file));
    EXPECT_EQ(a.shape, (std::vector<int64_t>{p.B, n, heads, p.D})) << file;
    HostBuffer b(DType::f64, a.numel());
    for (int64_t i = 0; i < a.numel(); ++i)
      b.set(i, a.values[static_cast<size_t>(i)]);
    return logical_tensor(b, st, p.B, heads, n, p.D);
  };
  EXPECT_TRUE(compare_to_reference(logical("dq.npy", p.H, p.N_Q, s.q), ref.dq).ok(tol));
  EXPECT_TRUE(compare_to_reference(logical("dk.npy", p.H_KV, p.N_K, s.k), ref.dk).ok(tol));
  EXPECT_TRUE(compare_to_reference(logical("dv.npy", p.H_KV, p.N_K, s.k), ref.dv).ok(tol));
}

TEST_F(CliTest, AttentionBackwardWithNpyDoutAndAtomicVariant) {
  const std::vector<int64_t> shape{1, 2, 32, 16};
  write_tensor(path("dout.npy"), DType::f32, shape, 21);
  ToolRun r = kiln({"attention", "--batch=1", "--heads=2", "--seq-q=32", "--head-dim=16", "--dtype=bf16",
                    "--backward", "--nondeterministic", "--interpret", "--check", "--dout", path("dout.npy"),
                    "--dk", path("dk.npy")});
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("(nondeterministic"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
  EXPECT_EQ(read_npy(path("dk.npy")).shape, shape);
  EXPECT_FALSE(llvm::sys::fs::exists(path("dq.npy")));
}

TEST_F(CliTest, AttentionBackwardOptionErrors) {
  const std::vector<std::string> base = {"attention",  "--batch=1",     "--heads=2",
                                         "--seq-q=16", "--head-dim=16", "--interpret"};
  auto with = [&](std::initializer_list<std::string> extra) {
    std::vector<std::string> a = base;
    a.insert(a.end(), extra);
    return kiln(a);
  };
  expect_error(with({"--dq", path("dq.npy")}), {"--dq belongs to the backward pass", "--backward"});
  expect_error(with({"--nondeterministic"}), {"--nondeterministic belongs to the backward pass"});
  expect_error(with({"--backward", "--out", path("o.npy")}),
               {"--out and --lse write the forward's outputs", "--dq"});
  expect_error(with({"--backward", "--dq", path("g.npy"), "--dv", path("g.npy")}),
               {"--dq and --dv name the same file"});
  expect_error(with({"--backward", "--bench"}), {"--bench", "--interpret"});
  write_tensor(path("dout.npy"), DType::f32, {1, 2, 15, 16}, 22);
  expect_error(with({"--backward", "--dout", path("dout.npy")}),
               {"dout.npy", "(dO)", "does not match the problem"});
  const std::string before = slurp(path("dout.npy"));
  expect_error(with({"--backward", "--dout", path("dout.npy"), "--dk", path("dout.npy")}),
               {"refusing to overwrite the input", "--dout"});
  EXPECT_EQ(slurp(path("dout.npy")), before);
  EXPECT_FALSE(llvm::sys::fs::exists(path("dq.npy")));
  EXPECT_FALSE(llvm::sys::fs::exists(path("g.npy")));
}

// ---- compare-loads, model, cache, demo ----

TEST_F(CliTest, CompareLoadsInterpreted) {
  ToolRun r = kiln({"compare-loads", "--seq", "64", "--head-dim", "32", "--heads", "2", "--causal",
                    "bottom-right", "--interpret", "--diff", "--arch", "sm_80"});
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("K_TRANSPOSED=1 vs 0"), std::string::npos);
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("vs reference"), std::string::npos);
  EXPECT_NE(r.out.find("cp.async"), std::string::npos);
  EXPECT_NE(r.out.find("--- fa2_fwd K_TRANSPOSED=1"), std::string::npos);
  EXPECT_NE(r.out.find("\n-// config:"), std::string::npos);
  EXPECT_NE(r.out.find("\n+// config:"), std::string::npos);
  expect_error(kiln({"compare-loads", "--head-dim", "32", "--interpret"}), {"--seq"});
}

double json_number(const llvm::json::Object& o, llvm::StringRef key) {
  auto v = o.getNumber(key);
  EXPECT_TRUE(v.hasValue()) << key.str();
  return v.getValueOr(-1);
}

TEST_F(CliTest, ModelMatchesHandCounts) {
  ToolRun m = kiln({"model", "matmul", "--shape", "M=512,N=256,K=128", "--set",
                    "BLOCK_M=128,BLOCK_N=128,BLOCK_K=32", "--json"});
  ASSERT_EQ(m.rc, 0) << m.err;
  auto v = llvm::json::parse(m.out);
  ASSERT_TRUE(bool(v)) << m.out;
  const llvm::json::Object& o = *v->getAsObject();
  EXPECT_DOUBLE_EQ(json_number(o, "matrix_flops"), 2.0 * 512 * 256 * 128);
  // A is read once per column of tiles (2), B once per row of tiles (4); f16.
  EXPECT_DOUBLE_EQ(json_number(o, "bytes_loaded"), (512.0 * 128 * 2 + 128.0 * 256 * 4) * 2);
  EXPECT_DOUBLE_EQ(json_number(o, "bytes_stored"), 512.0 * 256 * 2);
  EXPECT_DOUBLE_EQ(json_number(o, "peak_tflops"),
                   rt::driver_available() ? json_number(o, "peak_tflops") : 989);

  ToolRun f = kiln({"model", "fa2_fwd", "--shape", "B=2,H=4,H_KV=4,N_Q=512,N_K=512,D=64", "--peak-tflops",
                    "100", "--peak-gbps", "1000", "--json"});
  ASSERT_EQ(f.rc, 0) << f.err;
  auto fv = llvm::json::parse(f.out);
  ASSERT_TRUE(bool(fv));
  const llvm::json::Object& fo = *fv->getAsObject();
  EXPECT_DOUBLE_EQ(json_number(fo, "matrix_flops"), 4.0 * 2 * 4 * 512 * 512 * 64);
  const double bytes = json_number(fo, "bytes_loaded") + json_number(fo, "bytes_stored");
  EXPECT_DOUBLE_EQ(json_number(fo, "compute_ms"), 4.0 * 2 * 4 * 512 * 512 * 64 / 100e12 * 1e3);
  EXPECT_DOUBLE_EQ(json_number(fo, "memory_ms"), bytes / 1000e9 * 1e3);

  ToolRun text =
      kiln({"model", "fa2_fwd", "--shape", "B=1,H=1,H_KV=1,N_Q=256,N_K=256,D=64", "--set", "CAUSAL=1"});
  ASSERT_EQ(text.rc, 0);
  EXPECT_NE(text.out.find("-bound"), std::string::npos);
  EXPECT_NE(text.out.find("intensity"), std::string::npos);

  expect_error(kiln({"model", "fa2_fwd", "--shape", "B=1,H=1"}),
               {"needs --shape values for H_KV, N_Q, N_K, D"});
  expect_error(kiln({"model", "matmul", "--shape", "M=1,N=1,K=1,Q=4"}),
               {"no parameter, size or scalar argument 'Q'"});
  expect_error(kiln({"model", "matmul", "--shape", "M=1,N=1,K=1", "--peak-tflops", "-3"}), {"positive"});
}

// The attention kernels' head-dim tile follows D unless --set says otherwise; sizes may come through --set.
TEST_F(CliTest, ModelOfAttentionFollowsTheHeadDimAndTakesSizesFromSet) {
  ToolRun d128 = kiln({"model", "fa2_fwd", "--shape", "B=1,H=2,H_KV=2,N_Q=256,N_K=256,D=128", "--json"});
  ASSERT_EQ(d128.rc, 0) << d128.err;
  auto v = llvm::json::parse(d128.out);
  ASSERT_TRUE(bool(v)) << d128.out;
  const llvm::json::Object& o = *v->getAsObject();
  EXPECT_DOUBLE_EQ(json_number(o, "matrix_flops"), 4.0 * 1 * 2 * 256 * 256 * 128);
  ASSERT_TRUE(o.getString("config").hasValue()) << d128.out;
  EXPECT_NE(o.getString("config")->str().find("HEAD_DIM=128"), std::string::npos) << d128.out;

  ToolRun via_set = kiln({"model", "vector_add", "--set", "n=4096,BLOCK=1024", "--json"});
  ASSERT_EQ(via_set.rc, 0) << via_set.err;
  auto vv = llvm::json::parse(via_set.out);
  ASSERT_TRUE(bool(vv)) << via_set.out;
  EXPECT_DOUBLE_EQ(json_number(*vv->getAsObject(), "programs"), 4);
  EXPECT_DOUBLE_EQ(json_number(*vv->getAsObject(), "bytes_loaded"), 2.0 * 4096 * 4);
}

// --measure runs any kernel; what needs no GPU is checked first.
TEST_F(CliTest, ModelMeasureChecksTheLaunchBeforeNeedingAGpu) {
  expect_error(kiln({"model", "softmax", "--shape", "n_rows=4,n_cols=64", "--set", "BLOCK=64", "--measure"}),
               {"needs a value for its integer arguments in_row_stride, out_row_stride"});
  std::string why;
  if (!rt::driver_available(&why))
    for (const char* k : {"matmul", "vector_add", "fa2_fwd"}) {
      std::vector<std::string> args = {"model", k, "--measure", "--shape"};
      args.push_back(std::string(k) == "matmul"       ? "M=64,N=64,K=64"
                     : std::string(k) == "vector_add" ? "n=4096"
                                                      : "B=1,H=1,H_KV=1,N_Q=128,N_K=128,D=64");
      expect_error(kiln(args), {"no CUDA driver found", "--measure times the kernel on the GPU"});
    }
}

TEST_F(CliTest, CachePathListClear) {
  const std::map<std::string, std::string> env = {{"KILN_CACHE_DIR", path("cache")}};
  ToolRun p = kiln({"cache", "path"}, env);
  ASSERT_EQ(p.rc, 0) << p.err;
  EXPECT_NE(p.out.find(path("cache") + "/compile"), std::string::npos) << p.out;
  EXPECT_NE(p.out.find(path("cache") + "/tune"), std::string::npos) << p.out;

  ASSERT_FALSE(llvm::sys::fs::create_directories(path("cache/tune")));
  write_file_atomically(path("cache/tune/fa2.json"), R"({"kernel": "fa2_fwd", "entries": []})");
  ToolRun l = kiln({"cache", "list", "--json"}, env);
  ASSERT_EQ(l.rc, 0) << l.err;
  auto v = llvm::json::parse(l.out);
  ASSERT_TRUE(bool(v)) << l.out;
  const llvm::json::Array* tune = v->getAsObject()->getArray("tune");
  ASSERT_NE(tune, nullptr);
  ASSERT_EQ(tune->size(), 1u);
  EXPECT_EQ((*tune)[0].getAsObject()->getString("kernel"), llvm::StringRef("fa2_fwd"));

  ToolRun c = kiln({"cache", "clear"}, env);
  ASSERT_EQ(c.rc, 0) << c.err;
  EXPECT_NE(c.out.find("1 autotune result"), std::string::npos) << c.out;
  EXPECT_FALSE(llvm::sys::fs::exists(path("cache/tune/fa2.json")));

  expect_error(kiln({"cache", "purge"}, env), {"path, list or clear", "'purge'"});
  expect_error(kiln({"cache"}, env), {"positional"});
}

TEST_F(CliTest, DemoInInterpreterMode) {
  ToolRun r = kiln({"demo", "--interpret"});
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  size_t oks = 0;
  for (size_t pos = 0; (pos = r.out.find("  OK\n", pos)) != std::string::npos; ++pos)
    ++oks;
  EXPECT_EQ(oks, 2u) << r.out;
  EXPECT_NE(r.out.find("causal=top-left"), std::string::npos);
  EXPECT_NE(r.out.find("kernel @fa2_fwd"), std::string::npos);
  EXPECT_NE(r.out.find("GPU: skipped"), std::string::npos);
  EXPECT_NE(r.out.find("all checks OK"), std::string::npos);
  if (!rt::driver_available()) {
    ToolRun plain = kiln({"demo", "--no-ir"});
    EXPECT_EQ(plain.rc, 0) << plain.err;
    EXPECT_NE(plain.out.find("GPU: none found"), std::string::npos) << plain.out;
    EXPECT_EQ(plain.out.find("kernel @fa2_fwd"), std::string::npos);
  }
}

} // namespace
} // namespace kiln
