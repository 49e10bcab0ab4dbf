// Reductions that no read of the kernel goes back to (codegen/plan_unordered_reductions.h): no barrier orders
// them before the program's later loads. A load through the same parameter, an atomic add whose old values are
// used, or a plain store keeps the barrier between the write and the next iteration's loads.
#include "codegen/codegen.h"
#include "codegen/pointer_roots.h"
#include "nvrtc_compile.h"
#include "planned_kernel.h"
#include "source_text.h"

#include "dsl/dsl.h"

#include <gtest/gtest.h>

using namespace kiln;

namespace {

using kiln_test::has;

const char* kOrderingBarrier = "global stores visible";

enum class Write { Reduction, UsedAtomic, Store };

// Four steps, each loading a chunk of x (and, with `reads_y`, of y) and writing it to y by `how`; UsedAtomic
// adds the old values of y to z, a reduction nothing reads.
Kernel write_then_load(Write how, bool reads_y) {
  Config c;
  c.num_warps = 4;
  KernelBuilder kb("write_then_load", c);
  Value x = kb.arg_ptr("x", f32), y = kb.arg_ptr("y", f32), z = kb.arg_ptr("z", f32);
  for_range(0, 4, 1, [&](Value i) {
    Value o = arange(0, 128) + i * 128;
    Value v = load(x + o);
    if (reads_y)
      v = v + load(y + o);
    if (how == Write::Reduction)
      atomic_add(y + o, v);
    else if (how == Write::UsedAtomic)
      atomic_add(z + o, atomic_add(y + o, v));
    else
      store(y + o, v);
  });
  return kb.finish();
}

TEST(UnorderedReductions, AReductionNoReadGoesBackToHasNoBarrierBeforeTheNextLoads) {
  for (const std::string arch : {"sm_80", "sm_90a"}) {
    SCOPED_TRACE(arch);
    const kiln_test::Planned p = kiln_test::plan_kernel(write_then_load(Write::Reduction, false), arch);
    const std::vector<const Op*> adds = kiln_test::ops_of(p.kernel, OpKind::AtomicAdd);
    ASSERT_EQ(adds.size(), 1u);
    EXPECT_EQ(p.plan.unordered_reductions.count(adds[0]), 1u);
    const GeneratedKernel g = generate_cuda(write_then_load(Write::Reduction, false), Target::parse(arch));
    EXPECT_FALSE(has(g.source, kOrderingBarrier)) << g.source;
    EXPECT_TRUE(has(g.lowered, "unordered (no read goes back to its tensor)")) << g.lowered;
    kiln_test::expect_nvrtc_compiles(g, arch);
  }
}

TEST(UnorderedReductions, AReadBackAUsedOldValueOrAPlainStoreKeepsTheBarrier) {
  struct Case {
    const char* what;
    Write how;
    bool reads_y;
    size_t unordered; // z's reduction in UsedAtomic
  };
  for (const Case& c : {Case{"y read back", Write::Reduction, true, 0}, Case{"old values used", Write::UsedAtomic, false, 1},
                        Case{"plain store", Write::Store, false, 0}}) {
    SCOPED_TRACE(c.what);
    const kiln_test::Planned p = kiln_test::plan_kernel(write_then_load(c.how, c.reads_y), "sm_90a");
    EXPECT_EQ(p.plan.unordered_reductions.size(), c.unordered);
    PointerRoots roots(p.kernel);
    for (const Op* op : p.plan.unordered_reductions) // only z's (parameter 2), which no read goes back to
      EXPECT_EQ(roots.of(op->operands[0]), std::optional(std::set<int>{2}));
    const GeneratedKernel g = generate_cuda(write_then_load(c.how, c.reads_y), Target::parse("sm_90a"));
    EXPECT_TRUE(has(g.source, kOrderingBarrier)) << g.source;
    kiln_test::expect_nvrtc_compiles(g, "sm_90a");
  }
}

// The fused backward's dK/dV adds dQ atomically and loads Q, dO, LSE and Δ every step: its adds are unordered
// (one barrier over both consumer warpgroups a step fewer); the deterministic dK/dV writes nothing in its loops.
TEST(UnorderedReductions, TheFusedBackwardsDqAddsAreUnordered) {
  for (const bool ws : {false, true}) {
    SCOPED_TRACE(ws ? "warp-specialised" : "plain");
    const kiln_test::Planned p = kiln_test::plan_for(
        "fa2_bwd_dkdv", {{"ATOMIC_DQ", 1}, {"BLOCK_M", 64}, {"BLOCK_N", 128}, {"WARP_SPECIALIZE", ws ? 1 : 0}},
        "sm_90a");
    const std::vector<const Op*> adds = kiln_test::ops_of(p.kernel, OpKind::AtomicAddBlock);
    ASSERT_FALSE(adds.empty());
    for (const Op* op : adds)
      EXPECT_EQ(p.plan.unordered_reductions.count(op), 1u) << op->loc.str();
  }
}

} // namespace
