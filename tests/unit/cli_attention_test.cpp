// `kiln attention` run as a process (KILN_TOOL_PATH) in the interpreter: .npy inputs and outputs against the
// double reference, byte orders and memory orders, bad files rejected with nothing written, option errors,
// and the backward (--backward: gradients checked and written, a given dO, the atomic variant, its errors).
#include "cli_test_fixture.h"
#include "kernels/attention/attention_bwd_problem.h"
#include "kernels/attention/attention_tolerance.h"
#include "kernels/attention/attention_problem.h"
#include "kernels/compare.h"
#include "runtime/cuda_driver.h"
#include "support/npy.h"
#include "support/output_set.h"

#include <gtest/gtest.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Path.h>

#include <bit>
#include <cstdlib>
#include <map>
#include <random>

namespace kiln {
namespace {

using testing_support::CliTest;
using testing_support::slurp;
using testing_support::ToolRun;

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
  write_output_file({"test input", file}, serialize_npy(t, shape, v));
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
  write_output_file({"test input", path("q_be.npy")}, be);
  std::string fo = header;
  fo.replace(fo.find("False"), 5, "True ");
  for (int64_t d = 0; d < 16; ++d) // Fortran order: the first index fastest
    for (int64_t n = 0; n < 32; ++n)
      fo += le.substr(data + static_cast<size_t>(n * 16 + d) * 4, 4);
  write_output_file({"test input", path("q_f.npy")}, fo);

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
    write_output_file({"test input", path("q_i32.npy")}, bytes);
  }
  expect_error(run(path("q_i32.npy")), {"q_i32.npy", "int32", "not supported for attention inputs"});
  nothing_written();

  // wrong shape
  write_tensor(path("q_shape.npy"), DType::f32, {1, 1, 31, 16}, 10);
  expect_error(run(path("q_shape.npy")), {"q_shape.npy", "(1, 1, 31, 16)", "(1, 1, 32, 16)"});
  nothing_written();

  // truncated
  std::string good = slurp(path("q.npy"));
  write_output_file({"test input", path("q_trunc.npy")}, good.substr(0, good.size() - 100));
  expect_error(run(path("q_trunc.npy")), {"q_trunc.npy", "truncated"});
  nothing_written();

  // not .npy at all
  write_output_file({"test input", path("q_text.npy")}, "this is not numpy data\n");
  expect_error(run(path("q_text.npy")), {"not an .npy file"});
  nothing_written();

  // missing file, only some inputs
  expect_error(run(path("missing.npy")), {"missing.npy"});
  expect_error(kiln({"attention", "--batch=1", "--heads=1", "--seq-q=32", "--head-dim=16", "--interpret",
                     "--q", path("q.npy")}),
               {"--q, --k and --v go together"});
  nothing_written();
}

TEST_F(CliTest, AttentionRefusesAnOutDtypeThatCannotHoldTheResult) {
  // V in the hundred thousands (f32 inputs): O does too, beyond f16's 65504. --out-dtype f16 used to write inf
  // after "check ok"; now the outputs are refused, naming the flag, and no file is written.
  const std::vector<int64_t> shape{1, 1, 16, 16};
  write_tensor(path("q.npy"), DType::f32, shape, 7);
  write_tensor(path("k.npy"), DType::f32, shape, 8);
  write_output_file({"test input", path("v.npy")}, serialize_npy(DType::f32, shape, std::vector<double>(256, 1e5)));
  auto run = [&](const char* out_dtype) {
    return kiln({"attention", "--batch=1", "--heads=1", "--seq-q=16", "--head-dim=16", "--dtype=f32",
                 "--interpret", "--check", "--q", path("q.npy"), "--k", path("k.npy"), "--v", path("v.npy"), "--out",
                 path("o.npy"), "--out-dtype", out_dtype});
  };
  expect_error(run("f16"), {"--out", "o.npy", "256 of its 256 values lie beyond f16's range", "65504",
                            "--out-dtype f32"});
  EXPECT_FALSE(llvm::sys::fs::exists(path("o.npy")));
  ToolRun ok = run("f32");
  EXPECT_EQ(ok.rc, 0) << ok.out << ok.err;
  EXPECT_TRUE(llvm::sys::fs::exists(path("o.npy")));
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

} // namespace
} // namespace kiln
