// schedule_products (codegen/schedule_products.h): which products a loop body issues early, where each is waited
// for, that the emitted loop follows the plan, that it compiles with no product serialised by ptxas, and that loops
// whose order another pass plans, mma.sync kernels and the switched-off code generator keep the program's order.
#include "codegen/codegen.h"
#include "codegen/describe_plan.h"
#include "codegen/planned_kernel.h"
#include "codegen/source_text.h"
#include "dsl/dsl.h"
#include "nvrtc_compile.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace kiln_test {
namespace {

// The backward's tiles the tuner offers at sm_90a, and the defaults (dK/dV: 64 keys, 64 or 32 query rows a step).
std::vector<std::map<std::string, int64_t>> dkdv_tiles() {
  return {{{"HEAD_DIM", 64}, {"BLOCK_N", 64}, {"BLOCK_M", 64}},
          {{"HEAD_DIM", 128}, {"BLOCK_N", 64}, {"BLOCK_M", 32}, {"CAUSAL", 1}},
          {{"HEAD_DIM", 128}, {"BLOCK_N", 128}, {"BLOCK_M", 64}, {"num_warps", 8}},
          {{"HEAD_DIM", 128}, {"BLOCK_N", 128}, {"BLOCK_M", 64}, {"num_warps", 8}, {"WARP_SPECIALIZE", 1}}};
}

// The dots of `loop`'s body (its top level), in program order.
std::vector<const Op*> dots_in(const Op& loop) {
  std::vector<const Op*> dots;
  for (const auto& op : loop.regions[0].ops)
    if (op->kind == OpKind::Dot)
      dots.push_back(op.get());
  return dots;
}

// The kernel's loops whose body holds `n` dots (the attention kernels' key or query loops: unmasked and masked).
std::vector<const Op*> loops_with_dots(const Kernel& k, size_t n) {
  std::vector<const Op*> loops;
  for (const Op* loop : ops_of(k, OpKind::For))
    if (dots_in(*loop).size() == n)
      loops.push_back(loop);
  return loops;
}

size_t index_of(const std::vector<const Op*>& order, const Op* op) {
  return static_cast<size_t>(std::find(order.begin(), order.end(), op) - order.begin());
}

// The first op of `order` of `kind` after position `from`.
size_t next_of_kind(const std::vector<const Op*>& order, size_t from, OpKind kind) {
  for (size_t i = from + 1; i < order.size(); ++i)
    if (order[i]->kind == kind)
      return i;
  return order.size();
}

// The op in `order` whose wait retires `dot`, and that wait.
std::pair<size_t, const ProductWait*> wait_for(const ProductSchedule& s, const std::vector<const Op*>& order,
                                               const Op* dot) {
  for (size_t i = 0; i < order.size(); ++i)
    if (const ProductWait* w = s.before_op(*order[i]);
        w && std::find(w->retired.begin(), w->retired.end(), dot) != w->retired.end())
      return {i, w};
  return {order.size(), nullptr};
}

// dK/dV's step computes Sᵀ = K Qᵀ, Pᵀ, dV += Pᵀ dO, dPᵀ = V dOᵀ, dSᵀ, dK += dSᵀ Q. dPᵀ needs nothing Pᵀ does: it is
// issued right after Sᵀ, and the wait for Sᵀ (before Pᵀ's exponentials) leaves it in flight; dSᵀ waits for dPᵀ and
// leaves dV in flight; dV and dK are waited for at the end of the body.
TEST(ProductSchedule, BackwardDkdvIssuesDPtBeforeTheSoftmax) {
  for (const auto& tile : dkdv_tiles()) {
    Planned p = plan_for("fa2_bwd_dkdv", tile, "sm_90a");
    SCOPED_TRACE(p.kernel.config.str());
    const ProductSchedule& s = p.plan.products;
    const std::vector<const Op*> loops = loops_with_dots(p.kernel, 4);
    EXPECT_FALSE(loops.empty());
    for (const Op* loop : loops) {
      const std::vector<const Op*> dots = dots_in(*loop);
      const Op *qkt = dots[0], *dv = dots[1], *dpt = dots[2], *dk = dots[3];
      ASSERT_TRUE(s.order.count(loop));
      const std::vector<const Op*> order = s.body_order(*loop);
      ASSERT_EQ(order.size(), loop->regions[0].ops.size()); // every op once
      const size_t exp = next_of_kind(order, index_of(order, qkt), OpKind::Unary);
      EXPECT_LT(index_of(order, qkt), index_of(order, dpt));
      EXPECT_LT(index_of(order, dpt), exp);
      EXPECT_LT(exp, index_of(order, dv));
      EXPECT_LT(index_of(order, dv), index_of(order, dk));
      EXPECT_EQ(s.issued_after.at(dpt), qkt);
      for (const Op* dot : dots)
        EXPECT_TRUE(s.stays_in_flight(*dot));
      const auto [qkt_wait_at, qkt_wait] = wait_for(s, order, qkt);
      ASSERT_NE(qkt_wait, nullptr);
      EXPECT_EQ(qkt_wait->retired, std::vector<const Op*>{qkt});
      EXPECT_EQ(qkt_wait->pending, 1); // dPᵀ
      EXPECT_LT(index_of(order, dpt), qkt_wait_at);
      EXPECT_LE(qkt_wait_at, exp);
      const auto [dpt_wait_at, dpt_wait] = wait_for(s, order, dpt);
      ASSERT_NE(dpt_wait, nullptr);
      EXPECT_EQ(dpt_wait->retired, std::vector<const Op*>{dpt});
      EXPECT_EQ(dpt_wait->pending, 1); // dV
      EXPECT_LT(index_of(order, dv), dpt_wait_at);
      EXPECT_EQ(s.at_end.at(loop), (std::vector<const Op*>{dv, dk}));
    }
  }
}

// PRODUCTS_IN_ORDER=1 leaves dK/dV's 128 x 128 step in the program's order: Sᵀ waited for before Pᵀ's
// exponentials with nothing else in flight, dV and dPᵀ issued after them and both waited for before dSᵀ, dK last.
// Without dPᵀ's 64 accumulator registers in flight under the exponentials ptxas spills a few bytes where the early
// issue spilled hundreds (260 and 288 bytes deterministic and fused on CUDA 13, 16 and 48 in order; worklog §109).
// The fused one's dQ adds by TMA reductions took it to 80 bytes (NVRTC 13.0), measured no slower than the 48 of
// the rotated stage's (worklog §112).
TEST(ProductSchedule, InProgramOrderEachProductIsIssuedWhereTheProgramComputesIt) {
  for (int64_t atomic : {0, 1}) {
    const std::map<std::string, int64_t> tile = {
        {"HEAD_DIM", 64},        {"BLOCK_N", 128},         {"BLOCK_M", 128},    {"num_warps", 8},
        {"WARP_SPECIALIZE", 1}, {"PRODUCTS_IN_ORDER", 1}, {"ATOMIC_DQ", atomic}};
    Planned p = plan_for("fa2_bwd_dkdv", tile, "sm_90a");
    SCOPED_TRACE(p.kernel.config.str());
    const ProductSchedule& s = p.plan.products;
    EXPECT_TRUE(s.order.empty()) << "nothing moved";
    EXPECT_TRUE(s.issued_after.empty());
    const std::vector<const Op*> loops = loops_with_dots(p.kernel, atomic ? 5 : 4);
    ASSERT_FALSE(loops.empty());
    for (const Op* loop : loops) {
      const std::vector<const Op*> dots = dots_in(*loop);
      const Op *qkt = dots[0], *dv = dots[1], *dpt = dots[2], *dk = dots[3];
      const std::vector<const Op*> order = s.body_order(*loop);
      const auto [qkt_wait_at, qkt_wait] = wait_for(s, order, qkt);
      ASSERT_NE(qkt_wait, nullptr);
      EXPECT_EQ(qkt_wait->pending, 0);
      EXPECT_LT(qkt_wait_at, index_of(order, dv));
      const auto [dpt_wait_at, dpt_wait] = wait_for(s, order, dpt);
      ASSERT_NE(dpt_wait, nullptr);
      EXPECT_EQ(dpt_wait->retired, (std::vector<const Op*>{dv, dpt}));
      EXPECT_EQ(dpt_wait->pending, 0);
      EXPECT_LT(dpt_wait_at, index_of(order, dk));
      EXPECT_TRUE(s.stays_in_flight(*dk));
    }
    const GeneratedKernel g = generate_cuda(p.kernel, Target::parse("sm_90a"));
    EXPECT_NE(g.lowered.find("PRODUCTS_IN_ORDER=1"), std::string::npos) << g.lowered;
    std::string why;
    if (!rt::nvrtc_available(&why))
      GTEST_SKIP() << "NVRTC not available: " << why;
    const rt::CompiledKernel k = rt::compile_cuda(compile_request_for(g, "sm_90a"));
    EXPECT_TRUE(rt::ptxas_product_advisories(k.log).empty()) << k.log;
    EXPECT_LE(k.usage.spill_store_bytes, atomic ? 96 : 64) << k.log;
  }
}

// A product whose A is staged in the scratch stays in flight where that staging is its loop body's only use of the
// scratch (the next use is the next iteration's staging, behind a barrier every thread passes after its wait): the
// atomic variant's dQ = dS K is waited for at its reader, the add, with dK issued before it retired there too.
// Where another op of the body reuses the scratch (here a reduction across warps), it waits at its issue.
TEST(ProductSchedule, AProductStagedInTheScratchWaitsAtItsIssueWhereTheBodyReusesTheScratch) {
  Planned p = plan_for("fa2_bwd_dkdv",
                       {{"HEAD_DIM", 128}, {"BLOCK_N", 128}, {"BLOCK_M", 64}, {"num_warps", 8}, {"ATOMIC_DQ", 1}},
                       "sm_90a");
  ASSERT_GT(p.plan.conversions_by(ConversionMethod::SharedOperand), 0);
  const ProductSchedule& s = p.plan.products;
  const std::vector<const Op*> loops = loops_with_dots(p.kernel, 5);
  EXPECT_FALSE(loops.empty());
  for (const Op* loop : loops) {
    const std::vector<const Op*> dots = dots_in(*loop), order = s.body_order(*loop);
    EXPECT_TRUE(s.stays_in_flight(*dots[4]));
    const auto [at, wait] = wait_for(s, order, dots[4]);
    ASSERT_NE(wait, nullptr);
    EXPECT_EQ(order[at]->kind, OpKind::AtomicAddBlock);
    EXPECT_EQ(wait->pending, 0);
  }

  KernelBuilder kb("staged_beside_a_reduction");
  Value a = kb.arg_ptr("a", f16), b = kb.arg_ptr("b", f16), out = kb.arg_ptr("out", f32);
  Value n = kb.arg("n", i32);
  Value a_ptr = make_block_ptr(a, {64, n * 64}, {n * 64, 1}, {0, 0}, {64, 64}, {1, 0});
  Value b_ptr = make_block_ptr(b, {n * 64, 64}, {64, 1}, {0, 0}, {64, 64}, {1, 0});
  Value acc = zeros({64, 64}, f32), rows = zeros({64}, f32);
  for_range(0, n, 1, [&](Value) {
    Value ta = load(a_ptr), tb = load(b_ptr);
    Value x = dot(ta, tb);
    acc = dot(trans(x.to(f16)), tb, acc); // A staged: x's rows are its columns
    rows = rows + sum(x, 0);              // across warps, through the scratch
    a_ptr = advance(a_ptr, {0, 64});
    b_ptr = advance(b_ptr, {64, 0});
  });
  store(make_block_ptr(out, {64, 64}, {64, 1}, {0, 0}, {64, 64}, {1, 0}), acc + rows.expand_dims(0));
  const Planned q = plan_kernel(kb.finish(), "sm_90a");
  ASSERT_GT(q.plan.conversions_by(ConversionMethod::SharedOperand), 0) << describe_plan(q.kernel, q.plan);
  ASSERT_GT(q.plan.reduction_slots, 0) << "the sum crosses warps";
  ASSERT_EQ(loops_with_dots(q.kernel, 2).size(), 1u);
  for (const Op* loop : loops_with_dots(q.kernel, 2))
    EXPECT_FALSE(q.plan.products.stays_in_flight(*dots_in(*loop)[1])) << describe_plan(q.kernel, q.plan);
}

// Fused and warp-specialised at D = 64, dK/dV computes and adds each step's dQ in the next step (the DSL carries
// dSᵀ): the product is issued first, the add after that step's Sᵀ and dPᵀ and before its exponentials, and waits
// for the product alone (Sᵀ and dPᵀ stay in flight under it). One more add after the loops (the last step's). At
// D = 128 or unspecialised the add follows its own step's product.
TEST(ProductSchedule, TheFusedBackwardAddsEachStepsDqUnderTheNextStepsFirstProducts) {
  auto fused = [](int64_t head_dim, bool ws) {
    return std::map<std::string, int64_t>{{"HEAD_DIM", head_dim}, {"BLOCK_N", 128},         {"BLOCK_M", 64},
                                          {"num_warps", 8},       {"WARP_SPECIALIZE", ws}, {"ATOMIC_DQ", 1}};
  };
  auto adds = [](const Kernel& k) { return ops_of(k, OpKind::AtomicAddBlock).size(); };
  Planned p = plan_for("fa2_bwd_dkdv", fused(64, true), "sm_90a");
  const ProductSchedule& s = p.plan.products;
  const std::vector<const Op*> loops = loops_with_dots(p.kernel, 5);
  ASSERT_EQ(loops.size(), 3u);
  EXPECT_EQ(adds(p.kernel), loops.size() + 1);
  for (const Op* loop : loops) {
    const std::vector<const Op*> dots = dots_in(*loop), order = s.body_order(*loop);
    const Op *dq = dots[0], *qkt = dots[1], *dpt = dots[3]; // the previous step's dQ first, in program order
    const size_t add = next_of_kind(order, 0, OpKind::AtomicAddBlock);
    ASSERT_LT(add, order.size());
    EXPECT_EQ(order[add]->operands[1], dq->result());
    EXPECT_LT(index_of(order, dq), index_of(order, qkt));
    EXPECT_GT(add, index_of(order, qkt));
    EXPECT_GT(add, index_of(order, dpt));
    EXPECT_LT(add, next_of_kind(order, 0, OpKind::Unary)) << "before the exponentials";
    const ProductWait* w = s.before_op(*order[add]);
    ASSERT_NE(w, nullptr);
    EXPECT_EQ(w->retired, std::vector<const Op*>{dq});
    EXPECT_EQ(w->pending, 2) << "Sᵀ and dPᵀ stay in flight under it";
  }
  for (const std::map<std::string, int64_t>& tile : {fused(128, true), fused(64, false)}) {
    Planned other = plan_for("fa2_bwd_dkdv", tile, "sm_90a");
    SCOPED_TRACE(other.kernel.config.str());
    EXPECT_EQ(adds(other.kernel), loops_with_dots(other.kernel, 5).size());
  }
}

// dQ's step: S = Q Kᵀ, P, dP = dO Vᵀ, dS, dQ += dS K. dP is issued right after S.
TEST(ProductSchedule, BackwardDqIssuesDPRightAfterS) {
  for (int64_t head_dim : {64, 128}) {
    Planned p = plan_for("fa2_bwd_dq", {{"HEAD_DIM", head_dim}, {"BLOCK_M", 64}, {"BLOCK_N", 128}}, "sm_90a");
    const ProductSchedule& s = p.plan.products;
    const std::vector<const Op*> loops = loops_with_dots(p.kernel, 3);
    EXPECT_FALSE(loops.empty());
    for (const Op* loop : loops) {
      const std::vector<const Op*> dots = dots_in(*loop);
      const std::vector<const Op*> order = s.body_order(*loop);
      EXPECT_EQ(s.issued_after.at(dots[1]), dots[0]);
      EXPECT_LT(index_of(order, dots[1]), next_of_kind(order, index_of(order, dots[0]), OpKind::Unary));
      EXPECT_EQ(wait_for(s, order, dots[0]).second->pending, 1);
      EXPECT_EQ(s.at_end.at(loop), std::vector<const Op*>{dots[2]});
    }
  }
}

// The emitted loop follows the plan: in dQ's unmasked loop two products are committed before the first exponential,
// whose wait leaves one in flight.
TEST(ProductSchedule, TheEmittedLoopIssuesBothProductsBeforeTheExponentials) {
  const KernelDef& def = builtin_kernels().find("fa2_bwd_dq");
  const GeneratedKernel g =
      generate_cuda(def.build(def.with_overrides(def.default_config(), {{"HEAD_DIM", 128}, {"BLOCK_N", 128}})),
                    Target::parse("sm_90a"));
  const size_t loop = g.source.find("for (int i");
  ASSERT_NE(loop, std::string::npos);
  const size_t exp = g.source.find("kiln::ex2(", loop);
  ASSERT_NE(exp, std::string::npos);
  const std::string before_exp = g.source.substr(loop, exp - loop);
  EXPECT_EQ(occurrences(before_exp, "kiln::wgmma_commit();"), 2);
  EXPECT_EQ(occurrences(before_exp, "kiln::wgmma_wait<1>();"), 1);
  EXPECT_EQ(occurrences(before_exp, "kiln::wgmma_wait<0>();"), 0);
}

// mma.sync runs synchronously: nothing to schedule at sm_80. Switched off, the code generator keeps the program's
// order and waits at every issue.
TEST(ProductSchedule, NothingScheduledOnMmaSyncOrWhenSwitchedOff) {
  const std::map<std::string, int64_t> tile = {{"HEAD_DIM", 64}, {"BLOCK_N", 64}, {"BLOCK_M", 64}};
  Planned sm80 = plan_for("fa2_bwd_dkdv", tile, "sm_80");
  EXPECT_TRUE(sm80.plan.products.order.empty());
  EXPECT_TRUE(sm80.plan.products.in_flight.empty());
  CodegenOptions off;
  off.product_schedule = false;
  Planned unscheduled = plan_for("fa2_bwd_dkdv", tile, "sm_90a", off);
  EXPECT_TRUE(unscheduled.plan.products.order.empty());
  EXPECT_TRUE(unscheduled.plan.products.in_flight.empty());
  const KernelDef& def = builtin_kernels().find("fa2_bwd_dkdv");
  const Kernel k = def.build(def.with_overrides(def.default_config(), tile));
  const std::string source = generate_cuda(k, Target::parse("sm_90a"), off).source;
  EXPECT_EQ(occurrences(source, "kiln::wgmma_commit();"), occurrences(source, "kiln::wgmma_wait<0>();"));
}

// Loops whose products another pass orders (FA2's forward with its last product late, or issued in turn) keep that
// pass's order and waits.
TEST(ProductSchedule, LoopsOrderedByAnotherPassAreLeftAlone) {
  const std::map<std::string, int64_t> ws = {
      {"HEAD_DIM", 128}, {"BLOCK_N", 128}, {"WARP_SPECIALIZE", 1}, {"num_stages", 3}, {"num_warps", 8}};
  for (const char* planned_by : {"LAST_PRODUCT_LATE", "PINGPONG"}) {
    std::map<std::string, int64_t> config = ws;
    config[planned_by] = 1;
    Planned p = plan_for("fa2_fwd", config, "sm_90a");
    SCOPED_TRACE(planned_by);
    EXPECT_TRUE(p.plan.late.on() || p.plan.pingpong.on());
    EXPECT_TRUE(p.plan.products.in_flight.empty());
    EXPECT_TRUE(p.plan.products.order.empty());
  }
  // Without either, S = Q Kᵀ is read right away and P V at the end: in flight, not moved.
  Planned plain = plan_for("fa2_fwd", ws, "sm_90a");
  EXPECT_TRUE(plain.plan.products.order.empty());
  for (const Op* loop : ops_of(plain.kernel, OpKind::For))
    EXPECT_EQ(plain.plan.products.at_end.at(loop), std::vector<const Op*>{dots_in(*loop).back()});
}

// The scheduled backward compiles with none of ptxas's product advisories (rt::ptxas_product_advisories): no
// product serialised (C7512 registers, C7514 an accumulator read in flight, C7520 a divergent path), no wait ptxas
// injected (C7517), no ignored setmaxnreg (C7508). The deterministic dK/dV drew C7520 until its loops' bounds were
// made warp-uniform to ptxas (worklog §91, §92); with its products no longer in series, its 64 × 128 tile over 8
// warps at D = 128 spills 28 bytes (and measured 9.45 → 8.64 ms on an H200 all the same); the other tiles that
// spilled nothing before spill nothing now.
TEST(ProductSchedule, TheBackwardCompilesWithoutSerialisedProducts) {
  std::string why;
  if (!rt::nvrtc_available(&why))
    GTEST_SKIP() << "NVRTC not available: " << why;
  auto compile = [](const std::string& kernel, const std::map<std::string, int64_t>& tile, bool spill_free) {
    const KernelDef& def = builtin_kernels().find(kernel);
    const GeneratedKernel g =
        generate_cuda(def.build(def.with_overrides(def.default_config(), tile)), Target::parse("sm_90a"));
    SCOPED_TRACE(kernel + " " + def.with_overrides(def.default_config(), tile).str());
    const rt::CompiledKernel k = rt::compile_cuda(compile_request_for(g, "sm_90a"));
    EXPECT_TRUE(rt::ptxas_product_advisories(k.log).empty()) << k.log;
    if (spill_free) {
      EXPECT_EQ(k.usage.spill_store_bytes, 0) << k.log;
    }
  };
  const std::vector<std::map<std::string, int64_t>> tiles = dkdv_tiles();
  for (size_t i = 0; i < tiles.size(); ++i)
    compile("fa2_bwd_dkdv", tiles[i], /*spill_free=*/i < 2); // the two 8-warp tiles spill (above)
  compile("fa2_bwd_dkdv", // the fused tile that computes and adds each step's dQ in the next step
          {{"HEAD_DIM", 64}, {"BLOCK_N", 128}, {"BLOCK_M", 64}, {"num_warps", 8}, {"WARP_SPECIALIZE", 1}, {"ATOMIC_DQ", 1}},
          true);
  compile("fa2_bwd_dq", {{"HEAD_DIM", 128}, {"BLOCK_M", 64}, {"BLOCK_N", 128}}, true);
  compile("fa2_bwd_dq", {{"HEAD_DIM", 64}, {"BLOCK_M", 64}, {"BLOCK_N", 64}, {"CAUSAL", 1}}, true);
}

} // namespace
} // namespace kiln_test
