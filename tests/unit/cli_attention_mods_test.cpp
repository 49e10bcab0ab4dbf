// `kiln attention --mod NAME[=ARGS]` run as a process (KILN_TOOL_PATH) in the interpreter: library mods
// checked against the double reference with the same mods, the config line naming them, and the errors of
// mods the command line cannot run (tensors it cannot give, --bench, a malformed mod); the backward with mods
// checked against the double gradients with the same mods.
#include "cli_test_fixture.h"

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
  expect_error(kiln(with({"--mod", "causal", "--bench"})), {"--mod runs without --bench"});
  expect_error(kiln(with({"--mod", "window=3"})), {"unknown mod 'window'"});
}

} // namespace
} // namespace kiln
