// `kiln attention --varlen=LENS` run as a process (KILN_TOOL_PATH) in the interpreter: packed sequences with
// empty ones and N_Q != N_K checked against the per-sequence reference, O and LSE (with --backward dQ, dK,
// dV) written in the packed layouts, and the flags that do not apply to packed sequences refused.
#include "cli_test_fixture.h"
#include "kernels/attention/attention_varlen_problem.h"
#include "support/npy.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace kiln {
namespace {

using testing_support::CliTest;
using testing_support::ToolRun;

TEST_F(CliTest, AttentionVarlenInterpretedChecksAndWritesPackedOutputs) {
  ToolRun r = kiln({"attention", "--varlen=0,1,17:30,70:0,5", "--heads=4", "--kv-heads=2", "--head-dim=32",
                    "--causal=bottom-right", "--interpret", "--check", "--set", "BLOCK_M=32,BLOCK_N=16",
                    "--out", path("o.npy"), "--lse", path("lse.npy")});
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("fa2_fwd_varlen varlen q[0,1,17,70,5] k[0,1,30,0,5] H4 H_KV2 D32"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("on the interpreter (BLOCK_M=32 BLOCK_N=16"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("VARLEN=1"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("check O:"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
  const NpyArray o = read_npy(path("o.npy")), lse = read_npy(path("lse.npy"));
  EXPECT_EQ(o.shape, (std::vector<int64_t>{93, 4, 32}));
  EXPECT_EQ(lse.shape, (std::vector<int64_t>{4, 93}));
  // Tokens 18..87 are the sequence with 70 rows and no keys: O = 0, LSE = -inf; the others are finite.
  for (int64_t h = 0; h < 4; ++h)
    for (int64_t t = 0; t < 93; ++t) {
      const double l = lse.values[static_cast<size_t>(h * 93 + t)];
      if (t >= 18 && t < 88)
        EXPECT_EQ(l, -std::numeric_limits<double>::infinity()) << "head " << h << " token " << t;
      else
        EXPECT_TRUE(std::isfinite(l)) << "head " << h << " token " << t;
    }
  for (int64_t d = 0; d < 32; ++d)
    EXPECT_EQ(o.values[static_cast<size_t>((20 * 4 + 1) * 32 + d)], 0.0);
}

TEST_F(CliTest, AttentionVarlenRunsTheDefaultConfig) {
  ToolRun r = kiln({"attention", "--varlen=3,40:9", "--heads=2", "--head-dim=16", "--dtype=bf16",
                    "--interpret", "--check"});
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("; the default config)"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
}

// --mod on packed sequences: the library mods applied to each sequence (positions within it), forward and
// backward, checked against the per-sequence reference with the same mods; a mod whose tensor the command
// line cannot make is refused.
TEST_F(CliTest, AttentionVarlenWithMods) {
  ToolRun r = kiln({"attention", "--varlen=0,1,40:17,70:0,33", "--heads=4", "--kv-heads=2", "--head-dim=32",
                    "--interpret", "--check", "--set", "BLOCK_M=32,BLOCK_N=16", "--mod", "alibi", "--mod",
                    "sliding_window=8", "--mod", "softcap=20"});
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("mods alibi,softcap(20)|sliding_window(8,0) (not autotuned)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("check O:"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
  ToolRun b = kiln({"attention", "--varlen=1,40:17,33", "--heads=2", "--head-dim=16", "--interpret",
                    "--check", "--backward", "--mod", "causal=bottom-right", "--mod", "alibi"});
  ASSERT_EQ(b.rc, 0) << b.out << b.err;
  EXPECT_NE(b.out.find("; mods alibi|causal_bottom_right"), std::string::npos) << b.out;
  EXPECT_NE(b.out.find("check dQ"), std::string::npos) << b.out;
  EXPECT_EQ(b.out.find("FAIL"), std::string::npos) << b.out;
  ToolRun e =
      kiln({"attention", "--varlen=3,4", "--heads=2", "--head-dim=16", "--interpret", "--mod", "document"});
  EXPECT_NE(e.rc, 0);
  EXPECT_NE(e.err.find("read the tensor 'q_doc', which the command line cannot make"), std::string::npos)
      << e.err;
  ToolRun f = kiln({"attention", "--varlen=3,4", "--heads=2", "--head-dim=16", "--interpret", "--mod", "document",
                    "--mod-tensor", "q_doc=ids.npy"});
  EXPECT_NE(f.rc, 0);
  EXPECT_NE(f.err.find("--mod-tensor applies to dense runs"), std::string::npos) << f.err;
}

TEST_F(CliTest, AttentionVarlenOptionErrors) {
  const std::vector<std::string> base = {"attention", "--heads=2", "--head-dim=16", "--interpret"};
  auto with = [&](std::initializer_list<std::string> extra) {
    std::vector<std::string> a = base;
    a.insert(a.end(), extra);
    return kiln(a);
  };
  expect_error(with({"--varlen=3,x"}), {"--varlen: 'x' is not a sequence length", "NQ:NK"});
  expect_error(with({"--varlen=3,4:"}), {"--varlen: '4:' is not a sequence length"});
  expect_error(with({"--varlen=3,-1"}), {"--varlen: '-1' is not a sequence length"});
  expect_error(with({"--varlen=3,"}), {"--varlen: '' is not a sequence length"});
  expect_error(with({"--varlen="}), {"--varlen is empty"});
  expect_error(with({"--varlen=3", "--batch=2"}), {"--batch does not apply to --varlen"});
  expect_error(with({"--varlen=3", "--seq-q=2"}), {"--seq-q does not apply to --varlen"});
  expect_error(with({"--varlen=3", "--dout=x.npy"}), {"--dout does not apply to --varlen"});
  expect_error(with({"--varlen=3", "--layout=bshd"}), {"--layout does not apply to --varlen"});
  expect_error(with({"--varlen=3", "--bench"}), {"--bench times the kernels on the GPU", "--interpret"});
  expect_error(with({"--varlen=3", "--bench", "--backward"}), {"--bench times the kernels on the GPU"});
  expect_error(with({"--varlen=3", "--bench", "--mod=causal"}), {"--bench with --varlen does not time mods"});
  expect_error(with({"--varlen=3", "--kv-heads=3"}), {"multiple of H_KV=3"});
  expect_error(with({"--varlen=3", "--set", "WARP_SPECIALIZE=1"}), {"WARP_SPECIALIZE"});
  expect_error(with({"--seq-q=4"}), {"--batch is required", "--varlen"});
}

} // namespace
} // namespace kiln

namespace kiln {
namespace {

using testing_support::CliTest;
using testing_support::ToolRun;

TEST_F(CliTest, AttentionVarlenBackwardChecksAndWritesGradients) {
  for (bool atomic : {false, true}) {
    SCOPED_TRACE(atomic ? "atomic dQ" : "deterministic");
    std::vector<std::string> args = {"attention",     "--varlen=0,17:30,40:0,5:9",
                                     "--heads=2",     "--kv-heads=1",
                                     "--head-dim=16", "--causal=top-left",
                                     "--interpret",   "--check",
                                     "--backward",    "--dq",
                                     path("dq.npy"),  "--dk",
                                     path("dk.npy"),  "--dv",
                                     path("dv.npy")};
    if (atomic)
      args.push_back("--nondeterministic");
    ToolRun r = kiln(args);
    ASSERT_EQ(r.rc, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("fa2 backward varlen"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("check dK:"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
    EXPECT_EQ(read_npy(path("dq.npy")).shape, (std::vector<int64_t>{62, 2, 16}));
    const NpyArray dk = read_npy(path("dk.npy"));
    EXPECT_EQ(dk.shape, (std::vector<int64_t>{39, 1, 16}));
  }
  expect_error(
      kiln({"attention", "--varlen=3", "--heads=1", "--head-dim=16", "--interpret", "--dq", path("x.npy")}),
      {"--dq belongs to the backward pass"});
  expect_error(kiln({"attention", "--varlen=3", "--heads=1", "--head-dim=16", "--interpret", "--backward",
                     "--set", "BLOCK_M=16"}),
               {"--set applies to the forward"});
}

} // namespace
} // namespace kiln
