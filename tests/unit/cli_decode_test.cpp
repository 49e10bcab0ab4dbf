// `kiln decode` run as a process (KILN_TOOL_PATH) in the interpreter: a paged cache with per-sequence key
// counts checked against the double reference, the split count it chose and why, and option errors.
#include "cli_test_fixture.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

using testing_support::CliTest;
using testing_support::ToolRun;

TEST_F(CliTest, DecodePagedGqaMatchesReference) {
  ToolRun r = kiln({"decode", "--batch=3", "--heads=8", "--kv-heads=2", "--seq-q=4", "--seq-k=256",
                    "--seqlens=256,0,77", "--page-size=16", "--head-dim=32", "--causal=bottom-right",
                    "--interpret", "--check"});
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("the heuristic's for 132 programs at once"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("pages=16"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("check O:"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
  ToolRun forced = kiln({"decode", "--batch=1", "--heads=4", "--kv-heads=1", "--seq-k=100", "--head-dim=16",
                         "--splits=7", "--set=BLOCK_N=32", "--interpret", "--check"});
  ASSERT_EQ(forced.rc, 0) << forced.out << forced.err;
  EXPECT_NE(forced.out.find("7 split(s) (--splits"), std::string::npos) << forced.out;
  EXPECT_EQ(forced.out.find("FAIL"), std::string::npos) << forced.out;
}

TEST_F(CliTest, DecodeOptionErrors) {
  const std::vector<std::string> base = {"decode",     "--batch=2",     "--heads=4",
                                         "--seq-k=64", "--head-dim=16", "--interpret"};
  auto with = [&](std::initializer_list<std::string> extra) {
    std::vector<std::string> args = base;
    args.insert(args.end(), extra);
    return args;
  };
  expect_error(kiln(with({"--causal=top-left"})), {"--causal must be none or bottom-right"});
  expect_error(kiln(with({"--page-size=24"})), {"--page-size=24 is not a power of two >= 16"});
  expect_error(kiln(with({"--seqlens=3"})), {"--seqlens gives 1 key counts", "--batch=2"});
  expect_error(kiln(with({"--seqlens=3,65"})), {"'65' is not a key count from 0 to --seq-k=64"});
  expect_error(kiln(with({"--page-size=16", "--set=BLOCK_N=32"})), {"wider than a page of 16 keys"});
  expect_error(kiln(with({"--bench"})), {"--bench times decode() on the GPU", "--interpret"});
}

} // namespace
} // namespace kiln
