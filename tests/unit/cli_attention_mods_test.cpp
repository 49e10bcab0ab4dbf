// `kiln attention --mod NAME[=ARGS]` run as a process (KILN_TOOL_PATH) in the interpreter: library mods
// checked against the double reference with the same mods, the config line naming them, and the errors of
// mods the command line cannot run (tensors it cannot give, a malformed mod), --bench failing as without
// mods; the backward with mods checked against the double gradients with the same mods.
#include "cli_test_fixture.h"

#include "runtime/cuda_driver.h"

#include <gtest/gtest.h>

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
  expect_error(kiln(with({"--mod", "document"})), {"'q_doc'", "AttentionOptions::mod_tensors"});
  expect_error(kiln(with({"--mod", "window=3"})), {"unknown mod 'window'"});
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
