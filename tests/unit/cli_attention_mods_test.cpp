// `kiln attention --mod NAME[=ARGS]` run as a process (KILN_TOOL_PATH) in the interpreter: library mods
// checked against the double reference with the same mods, the config line naming them, and the errors of
// mods the command line cannot run (tensors it cannot give, a malformed mod), --bench failing as without
// mods; the backward with mods checked against the double gradients with the same mods.
#include "cli_test_fixture.h"

#include "runtime/cuda_driver.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <string>
#include <vector>

namespace kiln {
namespace {

using testing_support::CliTest;
using testing_support::ToolRun;

TEST_F(CliTest, AttentionWithModsMatchesTheReferenceWithTheSameMods) {
  ToolRun r = kiln({"attention", "--batch=1", "--heads=4", "--kv-heads=2", "--seq-q=40", "--seq-k=70",
                    "--head-dim=32", "--interpret", "--check", "--set", "BLOCK_M=16,BLOCK_N=16", "--mod",
                    "sliding_window=8,2", "--mod", "softcap=5", "--mod", "alibi"});
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("mods softcap(5),alibi|sliding_window(8,2) (not autotuned)"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("check O:"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
}

TEST_F(CliTest, AttentionBackwardWithModsMatchesTheReferenceWithTheSameMods) {
  ToolRun r = kiln({"attention", "--batch=1", "--heads=2", "--kv-heads=1", "--seq-q=40", "--seq-k=50",
                    "--head-dim=32", "--interpret", "--check", "--backward", "--mod", "sliding_window=8,2",
                    "--mod", "softcap=3", "--mod", "alibi"});
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("mods softcap(3),alibi|sliding_window(8,2) (not autotuned)"), std::string::npos)
      << r.out;
  for (const char* grad : {"check dQ:", "check dK:", "check dV:"})
    EXPECT_NE(r.out.find(grad), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
}

TEST_F(CliTest, AttentionModsTheCommandLineCannotRun) {
  const std::vector<std::string> base = {"attention",  "--batch=1",     "--heads=1",
                                         "--seq-q=16", "--head-dim=16", "--interpret"};
  auto with = [&](std::initializer_list<std::string> extra) {
    std::vector<std::string> a = base;
    a.insert(a.end(), extra);
    return a;
  };
  expect_error(kiln(with({"--mod", "document"})), {"'q_doc'", "--mod-tensor q_doc=FILE.npy"});
  expect_error(kiln(with({"--mod", "window=3"})), {"unknown mod 'window'"});
}

// --mod-tensor NAME=FILE.npy gives the tensors mods read: one document-id tensor read along the queries and the
// keys by an expression, the library's document mask over two, a bias both scored and masked on, and attention
// sinks, each checked
// against the double reference with the same mods and tensors.
TEST_F(CliTest, AttentionModTensorsFromNpyFiles) {
  const std::vector<std::string> base = {"attention",       "--batch=2", "--heads=2",         "--seq-q=40",
                                         "--head-dim=16",   "--interpret", "--check", "--set",
                                         "BLOCK_M=16,BLOCK_N=16"};
  auto with = [&](std::initializer_list<std::string> extra) {
    std::vector<std::string> a = base;
    a.insert(a.end(), extra);
    return a;
  };
  std::vector<int32_t> ids;
  for (int b = 0; b < 2; ++b)
    for (int i = 0; i < 40; ++i)
      ids.push_back(i < 13 + 7 * b ? 0 : i < 31 ? 1 : 2);
  const std::string doc = write_int32_npy("doc.npy", {2, 40}, ids);
  std::vector<double> bias;
  for (int i = 0; i < 2 * 40 * 40; ++i)
    bias.push_back(std::sin(0.7 * i) * 2);
  const std::string bias_file = write_npy("bias.npy", {1, 2, 40, 40}, bias); // B broadcast
  const std::string sinks = write_npy("sinks.npy", {2}, {0.5, -1.0});
  for (const std::vector<std::string>& args :
       {with({"--mod", "mask=doc:i32[b, q_idx] == doc:i32[b, kv_idx]", "--mod-tensor", "doc=" + doc}),
        with({"--mod", "document", "--mod-tensor", "q_doc=" + doc, "--mod-tensor", "kv_doc=" + doc}),
        with({"--mod", "score=score + bias[b, h, q_idx, kv_idx]", "--mod", "mask=bias[b, h, q_idx, kv_idx] > -1.5",
              "--mod-tensor", "bias=" + bias_file}),
        with({"--mod", "sinks", "--mod-tensor", "sinks=" + sinks})}) {
    const ToolRun r = kiln(args);
    ASSERT_EQ(r.rc, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("check O:"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
  }
  // The backward reads them too (the gradients against the double ones with the same mods and tensors).
  const ToolRun bwd = kiln(with({"--backward", "--mod", "mask=doc:i32[b, q_idx] == doc:i32[b, kv_idx]", "--mod",
                                 "score=score + bias[b, h, q_idx, kv_idx]", "--mod", "sinks", "--mod-tensor",
                                 "doc=" + doc, "--mod-tensor", "bias=" + bias_file, "--mod-tensor",
                                 "sinks=" + sinks}));
  ASSERT_EQ(bwd.rc, 0) << bwd.out << bwd.err;
  for (const char* grad : {"check dQ:", "check dK:", "check dV:"})
    EXPECT_NE(bwd.out.find(grad), std::string::npos) << bwd.out;
  EXPECT_EQ(bwd.out.find("FAIL"), std::string::npos) << bwd.out;

  const std::string mask = "mask=doc:i32[b, q_idx] == doc:i32[b, kv_idx]";
  expect_error(kiln(with({"--mod", mask, "--mod-tensor", "doc"})), {"--mod-tensor 'doc': expected NAME=FILE.npy"});
  expect_error(kiln(with({"--mod", mask, "--mod-tensor", "ids=" + doc})),
               {"no mod reads a tensor 'ids'", "read [doc]"});
  expect_error(kiln(with({"--mod", mask, "--mod-tensor", "doc=" + doc, "--mod-tensor", "doc=" + doc})),
               {"the tensor 'doc' is given twice"});
  expect_error(kiln(with({"--mod", mask, "--mod-tensor", "doc=" + bias_file})),
               {"has 4 dims (1, 2, 40, 40)", "with 2 indices [B, N_Q]"});
  const std::string float_ids = write_npy("float_ids.npy", {2, 40}, std::vector<double>(80, 1.0));
  expect_error(kiln(with({"--mod", mask, "--mod-tensor", "doc=" + float_ids})),
               {"holds float32", "as i32, so expected an integer array"});
  expect_error(kiln(with({"--mod", mask, "--mod-tensor", "doc=" + path("missing.npy")})), {"missing.npy"});
  const std::string short_ids = write_int32_npy("short.npy", {2, 30});
  expect_error(kiln(with({"--mod", mask, "--mod-tensor", "doc=" + short_ids})),
               {"mod tensor 'doc' has extent 30 in dim 1 (N_Q); expected 40 or 1"});
}

// --bench with mods is refused only as the built-in kernels' is: with the interpreter, and without a GPU (the
// same message as without mods).
TEST_F(CliTest, AttentionModsBenchFailsAsTheBuiltInKernelsBenchDoes) {
  const std::vector<std::string> base = {"attention", "--batch=1", "--heads=1", "--seq-q=16",
                                         "--head-dim=16"};
  auto with = [&](std::initializer_list<std::string> extra) {
    std::vector<std::string> a = base;
    a.insert(a.end(), extra);
    return a;
  };
  expect_error(kiln(with({"--mod", "softcap=30", "--bench", "--interpret"})),
               {"--bench times the kernel on the GPU", "--interpret"});
  expect_error(kiln(with({"--mod", "softcap=30", "--bench", "--backward", "--interpret"})),
               {"--bench times the kernel on the GPU", "--interpret"});
  if (rt::driver_available())
    GTEST_SKIP() << "a CUDA driver is installed; the rest checks the message where none is";
  for (bool backward : {false, true}) {
    std::vector<std::string> plain = with({"--bench"}), modded = with({"--bench", "--mod", "softcap=30"});
    if (backward) {
      plain.push_back("--backward");
      modded.push_back("--backward");
    }
    const ToolRun a = kiln(plain), b = kiln(modded);
    EXPECT_NE(a.rc, 0);
    EXPECT_NE(b.rc, 0);
    EXPECT_EQ(a.err, b.err) << "the built-in kernels' --bench and --mod's fail alike without a GPU";
    EXPECT_NE(b.err.find("no CUDA driver found"), std::string::npos) << b.err;
  }
}

} // namespace
} // namespace kiln
