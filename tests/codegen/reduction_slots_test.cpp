// Cross-warp reductions share the scratch through two slots (LoweringPlan::reduction_slots) and skip their
// leading barrier where straight-line code proves no thread still reads the slot they write
// (Emitter::emit_reduce): after a barrier, or after another reduction, which leaves the other slot free. An
// if's branches start from what was read before the if, and after the if the reads are known where both
// branches end alike. In a loop without a barrier at its top the first reduction keeps its barrier; a loop
// that stores has one, which its first iteration skips (nothing was stored yet), reading then what was read
// before the loop. Checked on tests/reduction_chain_kernel.h (16 warps along a row, so every reduction crosses warps);
// the GPU test runs the same kernel (tests/gpu/reduction_slots_gpu_test.cpp).
#include "reduction_chain_kernel.h"

#include "codegen/codegen.h"
#include "codegen/describe_plan.h"
#include "nvrtc_compile.h"
#include "planned_kernel.h"
#include "source_text.h"

#include <gtest/gtest.h>

using namespace kiln;
using kiln_test::occurrences;
using kiln_test::plan_kernel;
using kiln_test::Planned;

namespace {

constexpr const char* kNoBarrier = "// no barrier first";

// The generated kernel's text after the prelude, from the first occurrence of `from` on (the whole kernel for "")
// up to the first occurrence of `to` after it (the end for "").
std::string between(const std::string& s, const std::string& from, const std::string& to) {
  const size_t entry = s.find("extern \"C\" __global__");
  EXPECT_NE(entry, std::string::npos);
  const size_t a = s.find(from, entry);
  EXPECT_NE(a, std::string::npos) << from;
  const size_t b = to.empty() ? std::string::npos : s.find(to, a + from.size());
  return s.substr(a, b == std::string::npos ? std::string::npos : b - a);
}

// The two branches of the kernel's first DSL if: the text from its `if (` line to its `} else {` (found at the
// indent of the if's comment line), and from there to the if's closing line.
std::pair<std::string, std::string> if_branches(const std::string& s) {
  const size_t comment = s.find("// if ", s.find("extern \"C\" __global__"));
  EXPECT_NE(comment, std::string::npos);
  const size_t line_start = s.rfind('\n', comment) + 1;
  const std::string indent = s.substr(line_start, comment - line_start);
  const size_t els = s.find("\n" + indent + "} else {", comment);
  const size_t end = s.find("\n" + indent + "}\n", els + 1);
  EXPECT_NE(els, std::string::npos);
  EXPECT_NE(end, std::string::npos);
  return {s.substr(comment, els - comment), s.substr(els, end - els)};
}

TEST(ReductionSlots, TwoOrMoreCrossWarpReductionsGetTwoSlots) {
  const Planned p = plan_kernel(kiln_test::reduction_chain_kernel(true), "sm_90a");
  EXPECT_EQ(p.plan.reduction_slots, 2) << describe_plan(p.kernel, p.plan);
  EXPECT_EQ(p.plan.reduction_slot_bytes % 16, 0);
  EXPECT_GT(p.plan.scratch_bytes, p.plan.reduction_slot_bytes);
}

TEST(ReductionSlots, OneCrossWarpReductionKeepsOneSlotOfItsOwnSize) {
  Config config;
  config.num_warps = 8;
  KernelBuilder kb("one_reduction", config);
  Value x = kb.arg_ptr("x", f32), out = kb.arg_ptr("out", f32);
  Value cols = arange(0, 1024);
  Value s = sum(load(x + cols, cols < 1024, 0.0f).reshape({1, 1024}), 1);
  store(out + arange(0, 1), s, arange(0, 1) < 1);
  const Planned p = plan_kernel(kb.finish(), "sm_80");
  EXPECT_EQ(p.plan.reduction_slots, 1);
  EXPECT_EQ(p.plan.reduction_slot_bytes, 8 * 4) << "eight warps' partial sums";
}

TEST(ReductionSlots, AReductionAfterABarrierOrAnotherReductionSkipsItsLeadingBarrier) {
  for (const char* arch : {"sm_80", "sm_90a"}) {
    SCOPED_TRACE(arch);
    const GeneratedKernel g = generate_cuda(kiln_test::reduction_chain_kernel(true), Target::parse(arch));
    // The loop stores, so its top has a barrier (the previous iteration's stores before this one's loads) that
    // the first iteration skips: the first reduction follows that barrier or the loop's entry, where nothing
    // was read, and the next three follow a reduction, in alternating slots.
    const std::string before_if = between(g.source, "// for ", "// if ");
    EXPECT_EQ(occurrences(before_if, "make the previous iterations' global stores visible"), 1) << before_if;
    EXPECT_EQ(occurrences(before_if, "make this program's global stores visible"), 0) << before_if;
    EXPECT_EQ(occurrences(before_if, kNoBarrier), 4) << "sum, max, sum, min: " << before_if;
    EXPECT_EQ(occurrences(before_if, "no thread has read slot 0"), 2);
    EXPECT_EQ(occurrences(before_if, "no thread has read slot 1"), 2);
    // Each branch starts where the min left off and takes the other slot; both end alike, so the argmax after
    // the if takes the slot after theirs, and the sum after the argmax follows it.
    const auto [then_branch, else_branch] = if_branches(g.source);
    EXPECT_EQ(occurrences(then_branch, kNoBarrier), 1) << then_branch;
    EXPECT_EQ(occurrences(else_branch, kNoBarrier), 1) << else_branch;
    EXPECT_EQ(occurrences(between(g.source, "// argmax", "// binary"), kNoBarrier), 1);
    EXPECT_EQ(occurrences(between(g.source, "", ""), kNoBarrier), 8) << "four before the if, one a branch, two after";
    kiln_test::expect_nvrtc_compiles(g, arch);
  }
}

TEST(ReductionSlots, ALoopWithoutABarrierAtItsTopStartsItsFirstReductionWithOne) {
  const GeneratedKernel g = generate_cuda(kiln_test::reduction_chain_kernel(false), Target::parse("sm_80"));
  const std::string before_if = between(g.source, "// for ", "// if ");
  EXPECT_EQ(occurrences(before_if, "make this program's global stores visible"), 0) << before_if;
  // sum (barrier: the last iteration's reductions may still be read), then max, sum, min without.
  EXPECT_EQ(occurrences(before_if, kNoBarrier), 3) << before_if;
  kiln_test::expect_nvrtc_compiles(g, "sm_80");
}

// A store before an if whose branches both load global memory: each branch orders the store before its load
// (the emitter used to clear the pending store in the first branch, leaving the second without its barrier).
TEST(ReductionSlots, EachBranchOfAnIfOrdersAStoreBeforeItBeforeItsLoads) {
  KernelBuilder kb("store_then_branches");
  Value buf = kb.arg_ptr("buf", f32), out = kb.arg_ptr("out", f32);
  Value flag = kb.arg("flag", i32);
  Value i = arange(0, 128);
  store(buf + i, i.to(f32), i < 128);
  Value got = zeros({128}, f32);
  if_(
      flag != 0, [&] { got = load(buf + (127 - i), i < 128, 0.0f); },
      [&] { got = load(buf + ((i + 1) % 128), i < 128, 0.0f) * 2.0f; });
  store(out + i, got, i < 128);
  const GeneratedKernel g = generate_cuda(kb.finish(), Target::parse("sm_80"));
  const auto [then_branch, else_branch] = if_branches(g.source);
  EXPECT_EQ(occurrences(then_branch, "make this program's global stores visible"), 1) << then_branch;
  EXPECT_EQ(occurrences(else_branch, "make this program's global stores visible"), 1) << else_branch;
}

// The barrier between a loop's stores and its next iteration's loads is skipped in the first iteration when
// nothing before the loop stored; a store before the loop keeps it in every iteration.
TEST(ReductionSlots, ALoopsStoreBarrierIsSkippedInItsFirstIterationOnlyWhenNothingWasStoredBefore) {
  for (bool store_before : {false, true}) {
    SCOPED_TRACE(store_before ? "a store before the loop" : "no store before the loop");
    KernelBuilder kb(store_before ? "store_then_loop" : "loop_stores");
    Value buf = kb.arg_ptr("buf", f32), n = kb.arg("n", i32);
    Value i = arange(0, 128);
    if (store_before)
      store(buf + i, zeros({128}, f32), i < 128);
    for_range(1, n, 1, [&](Value k) {
      Value prev = load(buf + ((k - 1) * 128 + i), i < 128, 0.0f); // what the previous iteration stored
      store(buf + (k * 128 + i), prev + 1.0f, i < 128);
    });
    const GeneratedKernel g = generate_cuda(kb.finish(), Target::parse("sm_80"));
    const std::string loop = between(g.source, "// for ", "");
    EXPECT_EQ(occurrences(loop, "make the previous iterations' global stores visible"), store_before ? 0 : 1)
        << loop;
    EXPECT_EQ(occurrences(loop, "make this program's global stores visible"), store_before ? 1 : 0) << loop;
    kiln_test::expect_nvrtc_compiles(g, "sm_80");
  }
}

// A full reduction's scalar made a one-element tile again with expand_dims (the builder makes that a broadcast)
// lowers, as the interpreter runs it; it used to stop the code generator with an internal error.
TEST(ReductionSlots, AReducedScalarExpandedToATileLowers) {
  Config config;
  config.num_warps = 8;
  KernelBuilder kb("expanded_scalar", config);
  Value x = kb.arg_ptr("x", f32), out = kb.arg_ptr("out", f32);
  Value cols = arange(0, 1024);
  Value s = sum(load(x + cols, cols < 1024, 0.0f), 0);
  store(out + arange(0, 1), expand_dims(s, 0), arange(0, 1) < 1);
  const Kernel k = kb.finish();
  const GeneratedKernel g = generate_cuda(k, Target::parse("sm_80"));
  kiln_test::expect_nvrtc_compiles(g, "sm_80");
}

} // namespace
