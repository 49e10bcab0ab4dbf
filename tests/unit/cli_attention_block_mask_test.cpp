// `kiln attention --block-mask` run as a process (KILN_TOOL_PATH) in the interpreter: the forward and the
// backward over a block mask built from the --mod mask mods at the config's tiles (--set, else the defaults),
// checked against the double reference with the same mods; the block mask's line (tiles, counts, mask mods);
// the flags it does not combine with.
#include "cli_test_fixture.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

using testing_support::CliTest;
using testing_support::ToolRun;

TEST_F(CliTest, AttentionOverABlockMaskMatchesTheReference) {
  ToolRun r = kiln({"attention", "--batch=1", "--heads=2", "--kv-heads=1", "--seq-q=40", "--seq-k=70",
                    "--head-dim=32", "--interpret", "--check", "--set", "BLOCK_M=16,BLOCK_N=16", "--block-mask",
                    "--mod", "sliding_window=8,2", "--mod", "softcap=5"});
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  // 40 x 70 at 16 x 16: 3 query tiles x 5 key tiles per head, 2 heads.
  EXPECT_NE(r.out.find("block mask at tiles BLOCK_M=16 x BLOCK_N=16:"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("of 30 tiles (mask mods [sliding_window(8,2)])"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the block mask's default config with --set; mods softcap(5)|sliding_window(8,2)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("check O:"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
}

TEST_F(CliTest, AttentionBackwardOverABlockMaskMatchesTheReference) {
  // Tiles from --set, and the built-in causal rule with a prefix-LM mask mod.
  ToolRun r = kiln({"attention", "--batch=1", "--heads=2", "--seq-q=50", "--seq-k=40", "--head-dim=32",
                    "--interpret", "--check", "--backward", "--block-mask", "--set", "BLOCK_M=32,BLOCK_N=16",
                    "--causal=bottom-right", "--mod", "prefix_lm=10"});
  ASSERT_EQ(r.rc, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("block mask at tiles BLOCK_M=32 x BLOCK_N=16"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("the default configs at the block mask's tiles BLOCK_M=32 x BLOCK_N=16"), std::string::npos)
      << r.out;
  for (const char* grad : {"check dQ:", "check dK:", "check dV:"})
    EXPECT_NE(r.out.find(grad), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
}

// Over a block mask whose lists are all runs (causal), --set may ask for the warp-specialised kernel of two key
// ranges (BLOCK_MASK_RUNS=1 is set from the block mask, or given).
TEST_F(CliTest, AttentionOverABlockMaskOfRunsTakesTheWarpSpecialisedConfig) {
  for (const char* set : {"BLOCK_M=32,BLOCK_N=16,WARP_SPECIALIZE=1,num_warps=2",
                          "BLOCK_M=32,BLOCK_N=16,WARP_SPECIALIZE=1,BLOCK_MASK_RUNS=1,num_warps=2"}) {
    ToolRun r = kiln({"attention", "--batch=1", "--heads=2", "--seq-q=70", "--head-dim=32", "--interpret", "--check",
                      "--block-mask", "--mod", "causal", "--set", set});
    ASSERT_EQ(r.rc, 0) << set << "\n" << r.out << r.err;
    EXPECT_NE(r.out.find("BLOCK_MASK_RUNS=1"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("WARP_SPECIALIZE=1"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("FAIL"), std::string::npos) << r.out;
  }
}

TEST_F(CliTest, AttentionBlockMaskFlagsItDoesNotCombineWith) {
  const std::vector<std::string> base = {"attention",  "--batch=1",     "--heads=1",   "--seq-q=32",
                                         "--head-dim=16", "--interpret", "--block-mask"};
  auto with = [&](std::initializer_list<std::string> extra) {
    std::vector<std::string> a = base;
    a.insert(a.end(), extra);
    return a;
  };
  expect_error(kiln(with({"--backward", "--nondeterministic"})),
               {"--nondeterministic", "always deterministic", "--block-mask"});
  // A window of 40 keys at 16 x 16 tiles: the last query tile's partial list is key tiles 0, 1 and 3, not a run,
  // so no warp-specialised kernel walks it.
  expect_error(kiln({"attention", "--batch=1", "--heads=1", "--seq-q=64", "--head-dim=16", "--interpret",
                     "--block-mask", "--mod", "sliding_window=40,0", "--set", "BLOCK_M=16,BLOCK_N=16,WARP_SPECIALIZE=1"}),
               {"WARP_SPECIALIZE", "BLOCK_MASK_RUNS=1 for a block mask whose lists are all runs"});
  expect_error(kiln(with({"--set", "BLOCK_M=24"})), {"BLOCK_M"});
  expect_error(kiln(with({"--bench"})), {"--bench times the kernel on the GPU", "--interpret"});
  expect_error(kiln({"attention", "--heads=1", "--head-dim=16", "--varlen=16,20", "--interpret", "--block-mask"}),
               {"--block-mask does not apply to --varlen"});
}

} // namespace
} // namespace kiln
