// plan_pingpong (codegen/plan_pingpong.h): which products the consumer warpgroups of a warp-specialised kernel
// issue in turn (PINGPONG=1), that the turns add only the barriers around those products, and why a kernel or
// config that does not allow it keeps the code it had.
#include "codegen/codegen.h"
#include "codegen/prelude.h"
#include "codegen/planned_kernel.h"
#include "codegen/source_text.h"
#include "nvrtc_compile.h"

#include <gtest/gtest.h>

#include <sstream>

namespace kiln_test {
namespace {

std::map<std::string, int64_t> fa2_pingpong(int64_t causal, int64_t pingpong = 1) {
  return {{"HEAD_DIM", 128}, {"BLOCK_N", 128}, {"CAUSAL", causal}, {"WARP_SPECIALIZE", 1}, {"PINGPONG", pingpong}};
}

// `source` without the ping-pong lines and blank lines, and without the plan's mention of the turns in its
// comments.
std::string without_turns(const std::string& source) {
  std::istringstream in(source);
  std::string out, line;
  const std::string dot_note = ", issued in turn (ping-pong)"; // the plan's note on each product's line
  while (std::getline(in, line)) {
    if (size_t at = line.find(dot_note); at != std::string::npos)
      line.erase(at, dot_note.size());
    if (line.empty() || line.find("ping-pong") != std::string::npos) // blank lines: the helpers' separators
      continue;
    if (line.find("PINGPONG") != std::string::npos) // the config as the header prints it
      continue;
    out += line + "\n";
  }
  return out;
}

// FA2's two key loops each hold Q Kᵀ and P V, all on wgmma: the two consumer warpgroups issue all four in turn.
TEST(PingPong, Fa2TwoWarpgroupsTakeTurnsAtEveryProductOfBothKeyLoops) {
  for (int64_t causal : {0, 1, 2}) {
    SCOPED_TRACE("CAUSAL=" + std::to_string(causal));
    Planned p = plan_for("fa2_fwd", fa2_pingpong(causal), "sm_90a");
    ASSERT_TRUE(p.plan.ws.on()) << p.plan.ws.why_not;
    const PingPong& pp = p.plan.pingpong;
    ASSERT_TRUE(pp.on()) << pp.why_not;
    EXPECT_EQ(pp.warpgroups, 2);
    const std::vector<const Op*> dots = ops_of(p.kernel, OpKind::Dot);
    ASSERT_EQ(dots.size(), 4u);
    for (const Op* dot : dots) {
      EXPECT_EQ(p.plan.dots.at(dot).instruction, DotInstruction::Wgmma);
      EXPECT_TRUE(pp.dots.count(dot)) << "dot at " << dot->loc.str();
    }
  }
}

// The turns are the only difference from the warp-specialised kernel without them: per product one wait for the
// turn before its first wgmma and one hand-over after its commit, and warpgroup 0's first and last turn.
TEST(PingPong, AddsOnlyTheTurnsAroundEachProduct) {
  const KernelDef& def = builtin_kernels().find("fa2_fwd");
  // Without turns the products are scheduled (schedule_products.h); a loop whose products take turns keeps their
  // order and waits, so the text is compared with the unscheduled kernel.
  CodegenOptions unscheduled;
  unscheduled.product_schedule = false;
  auto source = [&](int64_t pingpong) {
    return generate_cuda(def.build(def.with_overrides(def.default_config(), fa2_pingpong(1, pingpong))),
                         Target::parse("sm_90a"), pingpong ? CodegenOptions{} : unscheduled)
        .source;
  };
  const std::string with = source(1), without = source(0);
  EXPECT_EQ(occurrences(with, "kiln::named_barrier_sync(2 + kiln_warp / 4, 256);"), 4);
  EXPECT_EQ(occurrences(with, "kiln::named_barrier_arrive(2 + (kiln_warp / 4 + 1) % 2, 256);"), 4);
  EXPECT_EQ(occurrences(with, "if (kiln_warp < 4) kiln::named_barrier_arrive(2, 256);"), 1);
  EXPECT_EQ(occurrences(with, "if (kiln_warp < 4) kiln::named_barrier_sync(2, 256);"), 1);
  // Each turn brackets exactly one product: its wait comes before the product's fence, its hand-over after the
  // product's commit and before its wait.
  for (size_t at = with.find("named_barrier_sync(2 + kiln_warp"); at != std::string::npos;
       at = with.find("named_barrier_sync(2 + kiln_warp", at + 1)) {
    const size_t fence = with.find("kiln::wgmma_fence();", at), commit = with.find("kiln::wgmma_commit();", at),
                 handover = with.find("named_barrier_arrive(2 + (kiln_warp", at),
                 wait = with.find("kiln::wgmma_wait<", at);
    EXPECT_LT(fence, commit);
    EXPECT_LT(commit, handover);
    EXPECT_LT(handover, wait);
  }
  // ... and the ping-pong prelude, which only kernels with turns include.
  std::string with_prelude_removed = with;
  const std::string prelude(pingpong_prelude_source());
  const size_t at = with_prelude_removed.find(prelude);
  ASSERT_NE(at, std::string::npos);
  with_prelude_removed.erase(at, prelude.size());
  EXPECT_EQ(occurrences(without, prelude), 0);
  EXPECT_EQ(without_turns(with_prelude_removed), without_turns(without));
  EXPECT_EQ(occurrences(without, "kiln::named_barrier_arrive("), 0);
}

TEST(PingPong, NotAskedNotDone) {
  Planned p = plan_for("fa2_fwd", fa2_pingpong(0, 0), "sm_90a");
  EXPECT_TRUE(p.plan.ws.on());
  EXPECT_FALSE(p.plan.pingpong.on());
  EXPECT_TRUE(p.plan.pingpong.why_not.empty());
}

TEST(PingPong, SaysWhyWhereItDoesNotApply) {
  // Without a producer there are no consumer warpgroups to take turns: the warp specialisation's reason is given.
  Planned ampere = plan_for("fa2_fwd", fa2_pingpong(0), "sm_80");
  EXPECT_FALSE(ampere.plan.pingpong.on());
  EXPECT_NE(ampere.plan.pingpong.why_not.find("not warp-specialised"), std::string::npos)
      << ampere.plan.pingpong.why_not;
  EXPECT_NE(ampere.plan.pingpong.why_not.find("sm_80 has no TMA"), std::string::npos) << ampere.plan.pingpong.why_not;

  std::map<std::string, int64_t> unspecialised = fa2_pingpong(0);
  unspecialised["WARP_SPECIALIZE"] = 0;
  Planned plain = plan_for("fa2_fwd", unspecialised, "sm_90a");
  EXPECT_NE(plain.plan.pingpong.why_not.find("WARP_SPECIALIZE=0"), std::string::npos) << plain.plan.pingpong.why_not;

  std::map<std::string, int64_t> one_warpgroup = fa2_pingpong(0);
  one_warpgroup["BLOCK_N"] = 64;
  one_warpgroup["num_warps"] = 4;
  Planned alone = plan_for("fa2_fwd", one_warpgroup, "sm_90a");
  ASSERT_TRUE(alone.plan.ws.on()) << alone.plan.ws.why_not;
  EXPECT_EQ(alone.plan.pingpong.why_not, "num_warps=4 is one consumer warpgroup: no other to take turns with");

  CodegenOptions off;
  off.pingpong = false;
  Planned switched_off = plan_for("fa2_fwd", fa2_pingpong(0), "sm_90a", off);
  EXPECT_TRUE(switched_off.plan.ws.on());
  EXPECT_EQ(switched_off.plan.pingpong.why_not, "CodegenOptions::pingpong is off");

  // The generated kernel says so, for `--stage lowered` and for the tuner (which prunes the config).
  const KernelDef& def = builtin_kernels().find("fa2_fwd");
  const GeneratedKernel g = generate_cuda(def.build(def.with_overrides(def.default_config(), one_warpgroup)),
                                          Target::parse("sm_90a"));
  EXPECT_EQ(g.why_not_pingpong, alone.plan.pingpong.why_not);
  EXPECT_NE(g.lowered.find("no ping-pong (PINGPONG=1): num_warps=4"), std::string::npos) << g.lowered;
}

// The turns compile (the ping-pong prelude included) with no spill and no ignored setmaxnreg, causal (both loops)
// at the head dims and tiles the warp-specialised space offers two consumer warpgroups.
TEST(PingPong, CompilesWithoutSpills) {
  std::string why;
  if (!rt::nvrtc_available(&why))
    GTEST_SKIP() << "NVRTC not available: " << why;
  const KernelDef& def = builtin_kernels().find("fa2_fwd");
  for (int64_t head_dim : {64, 128})
    for (int64_t block_n : {64, 128}) {
      std::map<std::string, int64_t> o = fa2_pingpong(1);
      o["HEAD_DIM"] = head_dim;
      o["BLOCK_N"] = block_n;
      const Config c = def.with_overrides(def.default_config(), o);
      SCOPED_TRACE(c.str());
      const GeneratedKernel g = generate_cuda(def.build(c), Target::parse("sm_90a"));
      ASSERT_TRUE(g.why_not_pingpong.empty()) << g.why_not_pingpong;
      expect_compiles_without_spills(g, "sm_90a");
    }
}

} // namespace
} // namespace kiln_test
