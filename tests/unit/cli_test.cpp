// The `kiln` command line, run as a process (KILN_TOOL_PATH): option parsing and errors of every
// subcommand, emit at every stage that needs no GPU, compare-loads, the model's numbers, cache and demo.
// `kiln attention` has its own file (cli_attention_test.cpp).
#include "cli_test_fixture.h"
#include "runtime/cuda_driver.h"
#include "runtime/nvrtc.h"
#include "support/npy.h"
#include "support/output_set.h"

#include <gtest/gtest.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/JSON.h>
#include <llvm/Support/Path.h>

#include <cstdlib>
#include <map>

namespace kiln {
namespace {

using testing_support::CliTest;
using testing_support::slurp;
using testing_support::ToolRun;

// CliTest: tests/cli_test_fixture.h.

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
  // What the config space chooses cannot be fixed for a tune (it used to be dropped without a word).
  expect_error(kiln({"tune", "matmul", "--shape", "M=64,N=64,K=64", "--set", "BLOCK_M=64"}),
               {"kiln tune matmul chooses BLOCK_M itself", "run matmul --set BLOCK_M=..."});
  expect_error(kiln({"tune", "matmul", "--shape", "M=64,N=64,K=64", "--set", "num_warps=4"}),
               {"chooses num_warps itself"});
  expect_error(kiln({"tune", "matmul_split_k", "--shape", "M=64,N=64,K=64", "--set", "BLOCK_K=32"}),
               {"chooses BLOCK_K itself"}); // every config of its space sets BLOCK_K=64
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
      expect_error(kiln(args), {"no CUDA driver found", "times every candidate on the GPU"});
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

  // num_warps and num_stages are set as emit sets them (the model reads the config line).
  ToolRun warps = kiln({"model", "matmul", "--shape", "M=512,N=256,K=128", "--set", "num_warps=4,num_stages=3"});
  ASSERT_EQ(warps.rc, 0) << warps.err;
  EXPECT_NE(warps.out.find("num_warps=4 num_stages=3"), std::string::npos) << warps.out;
  expect_error(kiln({"model", "matmul", "--shape", "M=1,N=1,K=1", "--set", "num_warps=3"}), {"num_warps"});

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

  // D = 96: two head-dim tiles of 64 and 32 (SPLIT_D), whose products count 96 columns, not 128.
  ToolRun d96 = kiln({"model", "fa2_fwd", "--shape", "B=1,H=2,H_KV=2,N_Q=256,N_K=256,D=96", "--json"});
  ASSERT_EQ(d96.rc, 0) << d96.err;
  auto v96 = llvm::json::parse(d96.out);
  ASSERT_TRUE(bool(v96)) << d96.out;
  EXPECT_DOUBLE_EQ(json_number(*v96->getAsObject(), "matrix_flops"), 4.0 * 1 * 2 * 256 * 256 * 96);
  EXPECT_NE(d96.out.find("SPLIT_D=1"), std::string::npos) << d96.out;
  // Two tiles that cover less than D are refused, naming what they cover.
  expect_error(kiln({"model", "fa2_fwd", "--shape", "B=1,H=1,H_KV=1,N_Q=64,N_K=64,D=120", "--set", "SPLIT_D=1"}),
               {"SPLIT_D=1 covers 96 columns", "fewer than D=120", "SPLIT_D=0"});

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
  write_output_file({"test input", path("cache/tune/fa2.json")}, R"({"kernel": "fa2_fwd", "entries": []})");
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

  write_output_file({"test input", path("cache/tune/old.json")}, R"({"kernel": "fa2_fwd", "kiln_version": "0.0.1"})");
  ToolRun listed = kiln({"cache", "list"}, env);
  ASSERT_EQ(listed.rc, 0) << listed.err;
  EXPECT_NE(listed.out.find("(another build: `kiln cache prune`)"), std::string::npos) << listed.out;
  ToolRun pruned = kiln({"cache", "prune"}, env);
  ASSERT_EQ(pruned.rc, 0) << pruned.err;
  EXPECT_NE(pruned.out.find("removed 1 autotune result(s)"), std::string::npos) << pruned.out;
  EXPECT_FALSE(llvm::sys::fs::exists(path("cache/tune/old.json")));

  expect_error(kiln({"cache", "purge"}, env), {"path, list, prune or clear", "'purge'"});
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
