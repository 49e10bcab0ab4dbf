// plan_late_products (codegen/plan_late_products.h): which products a warp-specialised kernel issues after the
// next iteration's first (LAST_PRODUCT_LATE=1), how the emitted loop orders the issues, the waits and the slot's
// release, that the result compiles without spills or serialised products, and why a kernel or config that does
// not allow it keeps the code it had.
#include "codegen/codegen.h"
#include "codegen/planned_kernel.h"
#include "kernels/attention/attention_block_mask.h"
#include "kernels/attention/attention_mod_spec.h"
#include "kernels/attention/attention_problem.h"
#include "kernels/attention/fa2_fwd.h"
#include "codegen/source_text.h"
#include "nvrtc_compile.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace kiln_test {
namespace {

std::map<std::string, int64_t> fa2_late(int64_t causal, int64_t head_dim = 128, int64_t block_n = 128) {
  return {{"HEAD_DIM", head_dim}, {"BLOCK_N", block_n}, {"CAUSAL", causal},       {"WARP_SPECIALIZE", 1},
          {"num_stages", 3},      {"num_warps", 8},     {"LAST_PRODUCT_LATE", 1}};
}

// FA2's forward with `overrides`, generated for sm_90a.
GeneratedKernel fa2_sm90a(const std::map<std::string, int64_t>& overrides) {
  const KernelDef& def = builtin_kernels().find("fa2_fwd");
  return generate_cuda(def.build(def.with_overrides(def.default_config(), overrides)), Target::parse("sm_90a"));
}

size_t position(const Op& loop, const Op* op) {
  const auto& ops = loop.regions[0].ops;
  return static_cast<size_t>(std::find_if(ops.begin(), ops.end(), [&](const auto& o) { return o.get() == op; }) -
                             ops.begin());
}

// FA2's key loops each start with S = Q Kᵀ and end with O += P V: P V goes late in both, and the wait for it sits
// at the rescale of O, after the softmax's exponentials.
TEST(LateProducts, Fa2IssuesPVAfterTheNextQKtInBothKeyLoops) {
  for (int64_t causal : {0, 1, 2}) {
    SCOPED_TRACE("CAUSAL=" + std::to_string(causal));
    Planned p = plan_for("fa2_fwd", fa2_late(causal), "sm_90a");
    const LateProducts& late = p.plan.late;
    ASSERT_TRUE(late.on()) << late.why_not;
    const std::vector<const Op*> loops = ops_of(p.kernel, OpKind::For);
    const std::vector<const Op*> dots = ops_of(p.kernel, OpKind::Dot);
    ASSERT_EQ(loops.size(), 2u);
    ASSERT_EQ(dots.size(), 4u); // Q Kᵀ and P V in each loop, in program order
    for (size_t i = 0; i < 2; ++i) {
      const LateProduct& l = late.loops.at(loops[i]);
      EXPECT_EQ(l.first, std::vector<const Op*>{dots[2 * i]});
      EXPECT_EQ(l.last, std::vector<const Op*>{dots[2 * i + 1]});
      ASSERT_NE(l.first_reader, nullptr);
      EXPECT_EQ(l.first_reader->kind, OpKind::Binary); // O * alpha
      EXPECT_LT(position(*loops[i], l.first[0]), position(*loops[i], l.first_reader));
      EXPECT_LT(position(*loops[i], l.first_reader), position(*loops[i], l.last[0]));
      // The exponentials of P come before the wait: they run while the late product is on the tensor cores.
      bool exp_before_wait = false;
      for (size_t j = position(*loops[i], l.first[0]); j < position(*loops[i], l.first_reader); ++j)
        exp_before_wait |= loops[i]->regions[0].ops[j]->kind == OpKind::Unary;
      EXPECT_TRUE(exp_before_wait);
    }
    EXPECT_EQ(late.of_first(*dots[0]), &late.loops.at(loops[0]));
    EXPECT_EQ(late.of_first(*dots[1]), nullptr);
  }
}

// The order the plan asks for, in the emitted loop: S issued and left in flight, then (from the second iteration)
// the previous iteration's P V, then a wait that leaves P V in flight, the softmax, the wait for P V with the
// slot's release, the rescale, and P packed for the next iteration; after the loop, the last P V.
TEST(LateProducts, PreviousPVIsIssuedAfterQKtAndWaitedForAfterTheSoftmax) {
  const GeneratedKernel g = fa2_sm90a(fa2_late(0));
  ASSERT_TRUE(g.why_not_late_product.empty()) << g.why_not_late_product;
  const std::string& s = g.source;
  const size_t open = s.find("is issued in the next iteration, after the product at");
  ASSERT_NE(open, std::string::npos);
  const size_t loop = s.find("for (int i", open);
  const size_t s_issue = s.find("// left in flight", loop);
  const size_t pv_issue = s.find("// the previous iteration's product at fa2_fwd.cpp", s_issue);
  const size_t keep_in_flight = s.find("kiln::wgmma_wait<1>();", pv_issue);
  const size_t softmax = s.find("kiln::ex2(", keep_in_flight);
  const size_t pv_wait = s.find("kiln::wgmma_wait<0>(); // the previous iteration's product", softmax);
  const size_t release = s.find("kiln::mbarrier_arrive(kiln::smem_u32(&kiln_empty0[", pv_wait);
  const size_t pack = s.find("its A packed", release);
  const size_t after = s.find("// the last iteration's product at", pack);
  for (size_t at : {s_issue, pv_issue, keep_in_flight, softmax, pv_wait, release, pack, after})
    ASSERT_NE(at, std::string::npos);
  EXPECT_LT(s_issue, pv_issue);
  EXPECT_LT(pv_issue, keep_in_flight);
  EXPECT_LT(keep_in_flight, softmax);
  EXPECT_LT(softmax, pv_wait);
  EXPECT_LT(pv_wait, release);
  EXPECT_LT(release, pack);
  EXPECT_LT(pack, after);
  // Both key loops: one late product each, issued after each loop once.
  EXPECT_EQ(occurrences(s, "// the last iteration's product at"), 2);
  EXPECT_NE(g.lowered.find("is issued in the next iteration, after the product at"), std::string::npos)
      << g.lowered;
}

// With ping-pong, an iteration's two products go to the tensor cores in one turn: the turn is taken before Q Kᵀ,
// kept over it, and passed on after the previous P V (or right after Q Kᵀ in the first iteration); the P V after
// the loop takes a turn of its own.
TEST(LateProducts, UnderPingPongBothProductsOfAnIterationShareOneTurn) {
  std::map<std::string, int64_t> o = fa2_late(0);
  o["PINGPONG"] = 1;
  const GeneratedKernel g = fa2_sm90a(o);
  ASSERT_TRUE(g.why_not_late_product.empty()) << g.why_not_late_product;
  ASSERT_TRUE(g.why_not_pingpong.empty()) << g.why_not_pingpong;
  const std::string& s = g.source;
  const size_t loop = s.find("for (int i", s.find("is issued in the next iteration, after the product at"));
  const size_t take = s.find("// ping-pong: this warpgroup's turn to issue", loop);
  const size_t kept = s.find("// ping-pong: the turn is kept for the previous iteration's late product", take);
  const size_t pv_issue = s.find("// the previous iteration's product at fa2_fwd.cpp", kept);
  const size_t pv_commit = s.find("kiln::wgmma_commit();", pv_issue);
  const size_t pass = s.find("// ping-pong: the next warpgroup's turn", pv_commit);
  const size_t keep_in_flight = s.find("kiln::wgmma_wait<1>();", pass);
  const size_t first_iteration_pass = s.find("// ping-pong: the next warpgroup's turn", keep_in_flight);
  const size_t first_iteration_wait = s.find("kiln::wgmma_wait<0>();", first_iteration_pass);
  const size_t softmax = s.find("kiln::ex2(", first_iteration_wait);
  for (size_t at : {take, kept, pv_issue, pv_commit, pass, keep_in_flight, first_iteration_pass,
                    first_iteration_wait, softmax})
    ASSERT_NE(at, std::string::npos);
  EXPECT_LT(take, kept);
  EXPECT_LT(pv_commit, pass);
  EXPECT_LT(pass, keep_in_flight);
  EXPECT_LT(first_iteration_wait, softmax);
  // No turn is taken between Q Kᵀ and the late P V: one take per loop iteration (two loops), one per P V after a
  // loop, and the CTA's last.
  EXPECT_EQ(occurrences(s, "// ping-pong: this warpgroup's turn to issue"), 4);
}

// The plan is read off the kernel, not off FA2's source: the forward generated from attention mods (a score mod
// between Q Kᵀ and the softmax, a mask mod's key ranges) and over a block mask whose lists are runs takes it in
// each of its key loops too.
TEST(LateProducts, ModsAndBlockMaskForwardsTakeItToo) {
  kiln::AttentionProblem p;
  p.D = 128;
  p.causal = 1;
  kiln::Config c = kiln::default_fa2_config(p);
  c.set("BLOCK_M", 128).set("BLOCK_N", 128).set("WARP_SPECIALIZE", 1).set("LAST_PRODUCT_LATE", 1);
  c.num_warps = 8;
  c.num_stages = 3;
  for (const char* spec : {"softcap=30", "sliding_window=300", "alibi"}) {
    SCOPED_TRACE(spec);
    const GeneratedKernel g =
        generate_cuda(kiln::fa2_fwd_def(kiln::parse_mod_specs(spec).mods).build(c), Target::parse("sm_90a"));
    EXPECT_TRUE(g.why_not_late_product.empty()) << g.why_not_late_product;
    EXPECT_GE(occurrences(g.source, "// the last iteration's product at"), 2);
  }
  kiln::Config runs = c;
  runs.set("BLOCK_MASK_RUNS", 1);
  const GeneratedKernel g = generate_cuda(kiln::fa2_fwd_block_mask_def().build(runs), Target::parse("sm_90a"));
  EXPECT_TRUE(g.why_not_late_product.empty()) << g.why_not_late_product;
  EXPECT_EQ(occurrences(g.source, "// the last iteration's product at"), 2);
}

// D = 96 and 192 over two head-dim tiles (SPLIT_D): S is a chain of two products and O two accumulators, so each
// key loop has two first products and two late ones, which share one array of P's words; the loop waits for the
// first two with the late two left in flight.
TEST(LateProducts, TwoHeadDimTilesGiveTwoFirstAndTwoLastProducts) {
  for (int64_t head_dim : {128, 256}) {
    SCOPED_TRACE("HEAD_DIM=" + std::to_string(head_dim));
    std::map<std::string, int64_t> o = fa2_late(1, head_dim, head_dim == 256 ? 64 : 128);
    o["SPLIT_D"] = 1;
    Planned p = plan_for("fa2_fwd", o, "sm_90a");
    const LateProducts& late = p.plan.late;
    ASSERT_TRUE(late.on()) << late.why_not;
    const std::vector<const Op*> loops = ops_of(p.kernel, OpKind::For);
    const std::vector<const Op*> dots = ops_of(p.kernel, OpKind::Dot);
    ASSERT_EQ(loops.size(), 2u);
    ASSERT_EQ(dots.size(), 8u);
    for (size_t i = 0; i < 2; ++i) {
      const LateProduct& l = late.loops.at(loops[i]);
      EXPECT_EQ(l.first, (std::vector<const Op*>{dots[4 * i], dots[4 * i + 1]}));
      EXPECT_EQ(l.last, (std::vector<const Op*>{dots[4 * i + 2], dots[4 * i + 3]}));
      EXPECT_EQ(l.carried.size(), 2u);
      EXPECT_NE(l.carried[0], l.carried[1]);
    }
    const GeneratedKernel g = fa2_sm90a(o);
    ASSERT_TRUE(g.why_not_late_product.empty()) << g.why_not_late_product;
    // One array of P's words, which the second loop takes over with the first loop's last late products.
    EXPECT_EQ(occurrences(g.source, "kiln::u32 late_a"), 1);
    EXPECT_EQ(occurrences(g.source, "kiln::wgmma_wait<2>(); // this iteration's first products are done"), 2);
    EXPECT_NE(g.lowered.find("the products at"), std::string::npos) << g.lowered;
  }
}

TEST(LateProducts, NotAskedNotDone) {
  std::map<std::string, int64_t> o = fa2_late(0);
  o["LAST_PRODUCT_LATE"] = 0;
  Planned p = plan_for("fa2_fwd", o, "sm_90a");
  EXPECT_FALSE(p.plan.late.on());
  EXPECT_TRUE(p.plan.late.why_not.empty());
}

TEST(LateProducts, SaysWhyWhereItDoesNotApply) {
  Planned ampere = plan_for("fa2_fwd", fa2_late(0), "sm_80");
  EXPECT_NE(ampere.plan.late.why_not.find("not warp-specialised"), std::string::npos) << ampere.plan.late.why_not;

  std::map<std::string, int64_t> ahead = fa2_late(0);
  ahead["PRODUCT_AHEAD"] = 1;
  Planned both = plan_for("fa2_fwd", ahead, "sm_90a");
  ASSERT_TRUE(both.plan.ahead.on()) << both.plan.ahead.why_not;
  EXPECT_NE(both.plan.late.why_not.find("PRODUCT_AHEAD is on"), std::string::npos) << both.plan.late.why_not;

  // matmul's loop has one product: nothing to issue after another.
  const KernelDef& mm = builtin_kernels().find("matmul");
  Kernel k = mm.build(mm.with_overrides(mm.default_config(), {{"BLOCK_M", 128},
                                                                {"BLOCK_N", 256},
                                                                {"BLOCK_K", 64},
                                                                {"MIN_BLOCKS_PER_SM", 1},
                                                                {"WARP_SPECIALIZE", 1}}));
  k.config.set("LAST_PRODUCT_LATE", 1);
  Planned matmul = plan_kernel(std::move(k), "sm_90a");
  ASSERT_TRUE(matmul.plan.ws.on()) << matmul.plan.ws.why_not;
  EXPECT_NE(matmul.plan.late.why_not.find("fewer than two products"), std::string::npos) << matmul.plan.late.why_not;

  CodegenOptions off;
  off.late_product = false;
  Planned switched_off = plan_for("fa2_fwd", fa2_late(0), "sm_90a", off);
  EXPECT_EQ(switched_off.plan.late.why_not, "CodegenOptions::late_product is off");
}

// FA2's two key loops (unmasked tiles, then the masked ones) are one pipeline: the second loop's first iteration
// issues the first loop's last P V after its own Q Kᵀ, so that neither the first loop's last P V nor the second's
// first softmax runs with nothing beside it; the second loop's ring starts where the first stopped, on the
// producer's side too, and only the second loop issues late products after its end.
TEST(LateProducts, TheMaskedLoopIssuesTheUnmaskedLoopsLastProduct) {
  for (int64_t causal : {1, 2}) {
    SCOPED_TRACE("CAUSAL=" + std::to_string(causal));
    Planned p = plan_for("fa2_fwd", fa2_late(causal), "sm_90a");
    const std::vector<const Op*> loops = ops_of(p.kernel, OpKind::For);
    ASSERT_EQ(loops.size(), 2u);
    const LateProducts& late = p.plan.late;
    EXPECT_EQ(late.why_not_across_loops, "");
    EXPECT_EQ(late.loops.at(loops[0]).continued_by, loops[1]);
    EXPECT_EQ(late.loops.at(loops[1]).continues, loops[0]);
    EXPECT_EQ(late.loops.at(loops[0]).continues, nullptr);
    EXPECT_EQ(late.loops.at(loops[1]).continued_by, nullptr);

    const GeneratedKernel g = fa2_sm90a(fa2_late(causal));
    const std::string& src = g.source;
    EXPECT_NE(g.lowered.find("its first iteration issues the late product of the loop at fa2_fwd.cpp:159's last"),
              std::string::npos)
        << g.lowered;
    // After the first loop: whether it left a P V and its slot; the second loop's ring counter starts there.
    const size_t handover = src.find("issued by the loop at fa2_fwd.cpp:160");
    const size_t pending = src.find("const bool late_pending", handover);
    const size_t continues = src.find("the ring continues from the loop at fa2_fwd.cpp:159", pending);
    ASSERT_NE(handover, std::string::npos);
    ASSERT_NE(pending, std::string::npos);
    ASSERT_NE(continues, std::string::npos);
    // In the second loop the previous P V is issued after Q Kᵀ where the iteration is not the first or the first
    // loop left one, from the first loop's last slot in its first iteration.
    const std::string var = src.substr(pending + 11, src.find(' ', pending + 11) - pending - 11);
    const size_t issue =
        src.find("|| " + var + ")) { // the previous iteration's product at fa2_fwd.cpp:134", continues);
    ASSERT_NE(issue, std::string::npos) << var;
    EXPECT_LT(src.find("late_slot", issue), src.find("kiln::wgmma_commit()", issue)); // B's descriptor
    // Only the second loop issues late products after its end; the producer's second loop starts where its first
    // stopped.
    EXPECT_EQ(occurrences(src, "{ // the last iteration's product at fa2_fwd.cpp:134"), 1);
    EXPECT_GT(src.find("{ // the last iteration's product at fa2_fwd.cpp:134"), continues);
    EXPECT_EQ(occurrences(src, "where the loop at fa2_fwd.cpp:159 stopped, as the consumers' ring does"), 1);
  }
}

// Switched off, or under PINGPONG (whose turns are built for one loop), each loop issues its own last products after
// its end and its ring starts at slot 0; the plan says why.
TEST(LateProducts, AcrossLoopsOffOrUnderPingPongEachLoopIssuesItsOwn) {
  CodegenOptions off;
  off.late_across_loops = false;
  Planned switched_off = plan_for("fa2_fwd", fa2_late(1), "sm_90a", off);
  EXPECT_EQ(switched_off.plan.late.why_not_across_loops, "CodegenOptions::late_across_loops is off");
  std::map<std::string, int64_t> pingpong = fa2_late(1);
  pingpong["PINGPONG"] = 1;
  Planned turns = plan_for("fa2_fwd", pingpong, "sm_90a");
  ASSERT_TRUE(turns.plan.late.on()) << turns.plan.late.why_not;
  EXPECT_NE(turns.plan.late.why_not_across_loops.find("PINGPONG is on"), std::string::npos)
      << turns.plan.late.why_not_across_loops;
  for (const Planned* p : {&switched_off, &turns})
    for (const auto& [loop, l] : p->plan.late.loops)
      EXPECT_TRUE(l.continues == nullptr && l.continued_by == nullptr) << loop->loc.str();
  const GeneratedKernel g = generate_cuda(switched_off.kernel, Target::parse("sm_90a"), off);
  EXPECT_EQ(occurrences(g.source, "{ // the last iteration's product at fa2_fwd.cpp:134"), 2);
  EXPECT_EQ(g.source.find("late_pending"), std::string::npos);
}

// P kept packed (half an S tile) beside S and O: the tiles the space offers compile with no spill, no ignored
// setmaxnreg, and no product serialised by ptxas (C7512 for registers; C7514 where a path could read an
// accumulator with a product in flight, which undoes the overlap), causal (both loops), D = 64 and 128.
TEST(LateProducts, CompilesWithoutSpillsOrSerialisedProducts) {
  std::string why;
  if (!rt::nvrtc_available(&why))
    GTEST_SKIP() << "NVRTC not available: " << why;
  const KernelDef& def = builtin_kernels().find("fa2_fwd");
  for (const int64_t head_dim : {64, 128})
    for (const int64_t block_n : {64, 128}) {
      const Config c = def.with_overrides(def.default_config(), fa2_late(1, head_dim, block_n));
      SCOPED_TRACE(c.str());
      const GeneratedKernel g = generate_cuda(def.build(c), Target::parse("sm_90a"));
      ASSERT_TRUE(g.why_not_late_product.empty()) << g.why_not_late_product;
      const std::string log = expect_compiles_without_spills(g, "sm_90a");
      EXPECT_TRUE(rt::ptxas_product_advisories(log).empty()) << log;
    }
}

// Two head-dim tiles (SPLIT_D): the chained first products and the two late ones are not serialised by ptxas
// either, and nothing spills (when the producer kept a cp.async path for launches with illegal maps, stepping four
// tiles' addresses in its 56 registers spilled ~100 bytes).
TEST(LateProducts, TwoHeadDimTilesCompileWithoutSerialisedProducts) {
  std::string why;
  if (!rt::nvrtc_available(&why))
    GTEST_SKIP() << "NVRTC not available: " << why;
  const KernelDef& def = builtin_kernels().find("fa2_fwd");
  for (auto [head_dim, block_n] : {std::pair<int64_t, int64_t>{128, 128}, {256, 64}}) {
    std::map<std::string, int64_t> o = fa2_late(1, head_dim, block_n);
    o["SPLIT_D"] = 1;
    const Config c = def.with_overrides(def.default_config(), o);
    SCOPED_TRACE(c.str());
    const GeneratedKernel g = generate_cuda(def.build(c), Target::parse("sm_90a"));
    ASSERT_TRUE(g.why_not_late_product.empty()) << g.why_not_late_product;
    const std::string log = expect_compiles_without_spills(g, "sm_90a");
    EXPECT_TRUE(rt::ptxas_product_advisories(log).empty()) << log;
  }
}

} // namespace
} // namespace kiln_test
