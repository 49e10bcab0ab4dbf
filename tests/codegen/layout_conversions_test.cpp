// plan_layout_conversions and plan_scratch: every layout conversion a kernel needs, checked as data in the plan
// (which value, read by which op, from which layout to which, how, with how much scratch), and the emitter's
// refusal to make a conversion the plan lacks or to leave a planned one unmade.
#include "codegen/describe_plan.h"
#include "codegen/emit_cuda.h"
#include "codegen/operand_layouts.h"
#include "codegen/plan_scratch.h"
#include "dsl/dsl.h"
#include "planned_kernel.h"

#include <gtest/gtest.h>

using namespace kiln;
using kiln_test::ops_of;
using kiln_test::plan_for;
using kiln_test::Planned;

namespace {

std::vector<LayoutConversion> conversions_by(const LoweringPlan& plan, ConversionMethod m) {
  std::vector<LayoutConversion> out;
  for (const LayoutConversion& c : plan.conversions)
    if (c.method == m)
      out.push_back(c);
  return out;
}

// FA2's forward needs no conversion through shared memory on either arch: its row statistics live in slices of
// the score accumulator, and P is read as the A operand in the accumulator layout it was computed in. The one
// conversion is O's, from the accumulator's column pairs to 8-column runs by lane exchanges, so that the f16
// output is stored in 16-byte pieces.
TEST(LayoutConversions, Fa2ForwardConvertsOnlyItsOutputByRegisterShuffles) {
  for (const char* arch : {"sm_80", "sm_90a"}) {
    Planned p = plan_for("fa2_fwd", {}, arch);
    ASSERT_EQ(p.plan.conversions.size(), 1u) << arch;
    const LayoutConversion& c = p.plan.conversions[0];
    EXPECT_EQ(c.method, ConversionMethod::RegisterShuffles);
    const std::vector<const Op*> stores = ops_of(p.kernel, OpKind::StoreBlock);
    ASSERT_FALSE(stores.empty());
    EXPECT_EQ(c.user, stores.back()) << "O's store";
    EXPECT_EQ(c.value, c.user->operands[1]);
    EXPECT_EQ(c.from.kind, LayoutKind::Mma);
    EXPECT_TRUE(c.from.same_bases(p.plan.layout.at(c.value)));
    EXPECT_EQ(register_run(c.from, 1, 8), 2) << "column pairs";
    EXPECT_EQ(register_run(c.to, 1, 8), 8) << "8 f16 columns: 16 bytes";
    EXPECT_EQ(p.plan.block_accesses.at(c.user).piece, 8);
    EXPECT_EQ(c.swaps.size(), 2u);
    EXPECT_EQ(c.scratch_bytes, 0);
    EXPECT_EQ(c.from.str(), c.to.str()) << "one kind and shape: only the bases tell them apart";
    EXPECT_FALSE(c.from.same_bases(c.to));
    EXPECT_EQ(p.plan.scratch_bytes, 0) << arch;
  }
}

// The dK/dV kernel's products Pᵀ dO and dSᵀ Q read Pᵀ and dSᵀ (f32 accumulators, their f16 casts fused) as
// A operands. On sm_80 the warps split the 64x64 accumulators 2x2, while an A operand is split along M only,
// so each is converted through shared memory at the dot that reads it (two per query loop, three loops). On
// sm_90a the warps are 4x1 (warpgroups): the accumulator is the A layout already.
TEST(LayoutConversions, BackwardRegisterOperandsGoThroughSharedMemoryOnAmpereOnly) {
  Planned ampere = plan_for("fa2_bwd_dkdv", {}, "sm_80");
  const std::vector<LayoutConversion> shared = conversions_by(ampere.plan, ConversionMethod::SharedMemory);
  ASSERT_EQ(shared.size(), 6u);
  for (const LayoutConversion& c : shared) {
    ASSERT_EQ(c.user->kind, OpKind::Dot);
    EXPECT_TRUE(ampere.plan.fused_casts.count(c.user->operands[0]));
    EXPECT_EQ(c.value, dot_a_register_value(ampere.kernel, ampere.plan, *c.user)) << "the cast's f32 source";
    EXPECT_EQ(c.from.kind, LayoutKind::Mma);
    EXPECT_TRUE(c.from.same_bases(ampere.plan.layout.at(c.value)));
    EXPECT_EQ(c.to.kind, LayoutKind::MmaA);
    EXPECT_TRUE(c.to.same_bases(mma_a_layout(64, 64, ampere.plan.warps)));
    EXPECT_EQ(c.scratch_bytes, 64 * 64 * 4) << "a 64x64 f32 tile";
  }
  EXPECT_EQ(ampere.plan.scratch_bytes, 64 * 64 * 4);

  Planned hopper = plan_for("fa2_bwd_dkdv", {}, "sm_90a");
  EXPECT_TRUE(conversions_by(hopper.plan, ConversionMethod::SharedMemory).empty());
  EXPECT_EQ(hopper.plan.scratch_bytes, 0);
}

// The atomic dK/dV's dQ = dS K reads dS (the transposed dSᵀ tile) as its A operand. mma.sync converts it
// through shared memory into the A layout; wgmma stages it once as a K-major shared operand tile in the scratch
// and reads it through descriptors, so that no thread holds it in registers (10-16 % faster on the H200,
// worklog §79). The other products' register operands (Pᵀ, dSᵀ) are in the A layout already.
TEST(LayoutConversions, AtomicDqsOperandIsStagedAsASharedOperandOnHopper) {
  const std::map<std::string, int64_t> atomic = {{"ATOMIC_DQ", 1}, {"HEAD_DIM", 128}};
  Planned hopper = plan_for("fa2_bwd_dkdv", atomic, "sm_90a");
  const std::vector<LayoutConversion> staged = conversions_by(hopper.plan, ConversionMethod::SharedOperand);
  ASSERT_EQ(staged.size(), 3u) << "one dQ product a query loop";
  for (const LayoutConversion& c : staged) {
    ASSERT_EQ(c.user->kind, OpKind::Dot);
    EXPECT_EQ(c.value, c.user->operands[0]);
    EXPECT_EQ(hopper.plan.dots.at(c.user).instruction, DotInstruction::Wgmma);
    EXPECT_TRUE(c.from.same_bases(hopper.plan.layout.at(c.value))) << "written from the layout it is in";
    EXPECT_EQ(c.scratch_bytes, 64 * 64 * 2) << "dS: 64 query rows x 64 keys, f16";
  }
  EXPECT_TRUE(conversions_by(hopper.plan, ConversionMethod::SharedMemory).empty());
  EXPECT_EQ(hopper.plan.scratch_bytes, 64 * 64 * 2);
  const std::string lowered = describe_plan(hopper.kernel, hopper.plan);
  EXPECT_NE(lowered.find("A registers, staged as a K-major shared operand tile in the scratch"), std::string::npos)
      << lowered;

  Planned ampere = plan_for("fa2_bwd_dkdv", atomic, "sm_80");
  EXPECT_TRUE(conversions_by(ampere.plan, ConversionMethod::SharedOperand).empty());
}

// A row vector loaded a step ahead of its use (before the loop, then in each iteration for the next one), carried
// around the loop and met with a product's accumulator: both loads take the slice of the accumulator's layout its
// use wants (assign_layouts follows the use around the loop), so nothing is converted, on either arch.
Kernel build_rows_ahead_kernel() {
  Config config;
  config.num_warps = 4;
  config.num_stages = 2;
  KernelBuilder kb("rows_ahead", config);
  Value kp = kb.arg_ptr("K", f16), qp = kb.arg_ptr("Q", f16), rp = kb.arg_ptr("R", f32), op = kb.arg_ptr("O", f32);
  Value n = kb.arg("N", i32);
  Value k = load(make_block_ptr(kp, {64, 64}, {64, 1}, {0, 0}, {64, 64}, {1, 0}));
  Value q_ptr = make_block_ptr(qp, {n, 64}, {64, 1}, {0, 0}, {64, 64}, {1, 0});
  Value r_ptr = make_block_ptr(rp, {n}, {1}, {0}, {64}, {0});
  Value r_ahead = load(r_ptr, {0});
  Value acc = zeros({64, 64}, f32);
  for_range(0, n, 64, [&](Value) {
    Value r = r_ahead;
    r_ptr = advance(r_ptr, {64});
    r_ahead = load(r_ptr, {0}); // the next step's
    Value s = dot(k, trans(load(q_ptr, {0})));
    acc = acc + exp2(s - r.expand_dims(0));
    q_ptr = advance(q_ptr, {64, 0});
  });
  store(make_block_ptr(op, {64, 64}, {64, 1}, {0, 0}, {64, 64}, {1, 0}), acc);
  return kb.finish();
}

TEST(LayoutConversions, AVectorLoadedAStepAheadTakesItsUsesLayoutAroundTheLoop) {
  for (const char* arch : {"sm_80", "sm_90a"}) {
    SCOPED_TRACE(arch);
    Planned p = kiln_test::plan_kernel(build_rows_ahead_kernel(), arch);
    EXPECT_TRUE(conversions_by(p.plan, ConversionMethod::SharedMemory).empty())
        << describe_plan(p.kernel, p.plan);
    const Op* dot = ops_of(p.kernel, OpKind::Dot).at(0);
    const Layout wanted = slice_layout(p.plan.layout.at(dot->result()), 0);
    int vector_loads = 0;
    for (const Op* load : ops_of(p.kernel, OpKind::LoadBlock))
      if (p.kernel.type(load->result()).rank() == 1) {
        ++vector_loads;
        EXPECT_TRUE(p.plan.layout.at(load->result()).same_bases(wanted)) << p.plan.layout.at(load->result()).str();
      }
    EXPECT_EQ(vector_loads, 2);
  }
}

// FA1 keeps its running output and row statistics in memory between key blocks, so they come back in blocked
// layouts and meet the mma accumulator: five conversions through shared memory, each charged to the op whose
// DSL line needs it, the largest (the rescaled output, the accumulator P V adds to, into the mma layout)
// sizing the scratch.
TEST(LayoutConversions, Fa1ConversionsAreChargedToTheOpsThatNeedThem) {
  Planned p = plan_for("fa1_fwd", {}, "sm_80");
  const std::vector<LayoutConversion> shared = conversions_by(p.plan, ConversionMethod::SharedMemory);
  ASSERT_EQ(shared.size(), 5u);
  int into_dot = 0;
  for (const LayoutConversion& c : shared) {
    EXPECT_TRUE(c.loc().known());
    EXPECT_FALSE(c.from.same_bases(c.to));
    if (c.user->kind == OpKind::Dot) {
      ++into_dot;
      EXPECT_EQ(c.value, c.user->operands[2]) << "the accumulator operand";
      EXPECT_EQ(c.from.kind, LayoutKind::Blocked);
      EXPECT_EQ(c.to.kind, LayoutKind::Mma);
      EXPECT_EQ(c.scratch_bytes, p.plan.scratch_bytes);
    } else {
      EXPECT_EQ(c.user->kind, OpKind::Binary);
      EXPECT_LT(c.scratch_bytes, p.plan.scratch_bytes);
    }
  }
  EXPECT_EQ(into_dot, 1);
}

// Scratch is the largest of its uses: the softmax converts nothing but combines its row maxima and sums across
// warps, in two slots (the sum takes the one the max is not read from: tests/codegen/reduction_slots_test.cpp).
TEST(LayoutConversions, ScratchCoversCrossWarpReductions) {
  Planned p = plan_for("softmax", {}, "sm_80");
  EXPECT_TRUE(p.plan.conversions.empty());
  int64_t largest = 0;
  for (const Op* r : ops_of(p.kernel, OpKind::Reduce))
    largest = std::max(largest, cross_warp_reduction_bytes(reduce_input_layout(p.kernel, p.plan, *r), r->axis,
                                                           p.kernel.type(r->operands[0]).elem, false));
  EXPECT_GT(largest, 0);
  EXPECT_EQ(p.plan.reduction_slots, 2);
  EXPECT_EQ(p.plan.reduction_slot_bytes, (largest + 15) / 16 * 16);
  EXPECT_EQ(p.plan.scratch_bytes, p.plan.reduction_slot_bytes + largest);
}

// The emitter only makes the plan's conversions: one missing, or one planned that it never needs, is an
// internal error rather than code that disagrees with `kiln emit --stage lowered`.
TEST(LayoutConversions, EmitterMakesExactlyThePlansConversions) {
  const Target target = Target::parse("sm_80");
  Planned p = plan_for("fa2_bwd_dq", {}, "sm_80");
  ASSERT_FALSE(conversions_by(p.plan, ConversionMethod::SharedMemory).empty());
  EXPECT_NO_THROW((void)emit_cuda(p.kernel, p.plan, target, {}));

  LoweringPlan missing = p.plan;
  missing.conversions.erase(missing.conversions.begin());
  EXPECT_THROW((void)emit_cuda(p.kernel, missing, target, {}), InternalError);

  LoweringPlan extra = p.plan;
  extra.conversions.push_back(extra.conversions.front());
  EXPECT_THROW((void)emit_cuda(p.kernel, extra, target, {}), InternalError);

  Planned fa2 = plan_for("fa2_fwd", {}, "sm_80"); // the shuffles that widen O's runs for its store
  fa2.plan.conversions.clear();
  EXPECT_THROW((void)emit_cuda(fa2.kernel, fa2.plan, target, {}), InternalError);

  LoweringPlan small = p.plan;
  small.scratch_bytes /= 2;
  EXPECT_THROW((void)emit_cuda(p.kernel, small, target, {}), InternalError);
}

// `--stage lowered` prints every conversion from the plan with its DSL line and method; two layouts whose
// summaries agree are told apart by their bases.
TEST(LayoutConversions, LoweredSummaryPrintsThePlansConversions) {
  Planned p = plan_for("matmul", {}, "sm_90a");
  ASSERT_EQ(p.plan.conversions.size(), 1u);
  const LayoutConversion& c = p.plan.conversions[0];
  const std::string lowered = describe_plan(p.kernel, p.plan);
  const size_t at = lowered.find(fmt::format("convert %{} at {} (store_block): ", c.value, c.loc().str()));
  ASSERT_NE(at, std::string::npos) << lowered;
  const std::string line = lowered.substr(at, lowered.find('\n', at) - at);
  EXPECT_NE(line.find("[" + c.from.bases_str() + "] -> [" + c.to.bases_str() + "]"), std::string::npos) << line;
  EXPECT_NE(line.find("by register shuffles (2 lane exchange(s))"), std::string::npos) << line;
  EXPECT_NE(lowered.find("layout conversions through shared memory: 0, by register shuffles: 1"), std::string::npos);
}

} // namespace
