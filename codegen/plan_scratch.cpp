#include "codegen/plan_scratch.h"

#include "codegen/operand_layouts.h"
#include "codegen/plan_scan.h"

#include <algorithm>

namespace kiln {

int64_t cross_warp_reduction_bytes(const Layout& in, int axis, DType t, bool argmax) {
  const ReductionPlan rp = reduction_plan(in, axis);
  if (rp.warp_bits.empty())
    return 0;
  int64_t numel = 1;
  for (int64_t d : slice_layout(in, axis).shape)
    numel *= d;
  const int64_t warps = int64_t{1} << rp.warp_bits.size();
  return warps * numel * (std::max(4, dtype_bytes(t)) + (argmax ? 4 : 0));
}

int64_t fma_staging_bytes(const Kernel& k, const Op& dot) {
  const DType in = k.type(dot.operands[0]).elem;
  return (k.type(dot.operands[0]).numel() + k.type(dot.operands[1]).numel()) * dtype_bytes(in);
}

namespace {

// The bytes a reduction exchanges between its warps in the scratch (0: none, or not a reduction).
int64_t reduction_scratch_bytes(const Kernel& k, const LoweringPlan& plan, const Op& op) {
  if ((op.kind != OpKind::Reduce && op.kind != OpKind::ArgMax) || plan.where(op.result()) == Placement::Flexible)
    return 0;
  return cross_warp_reduction_bytes(reduce_input_layout(k, plan, op), op.axis, k.type(op.operands[0]).elem,
                                    op.kind == OpKind::ArgMax);
}

// The bytes a scan, a sort or an FMA dot staging a register operand uses in the scratch (0: none).
int64_t whole_tile_scratch_bytes(const Kernel& k, const LoweringPlan& plan, const Op& op) {
  if (op.kind == OpKind::Scan || op.kind == OpKind::Sort)
    return scan_scratch_bytes(k, op);
  if (op.kind == OpKind::Dot && plan.dots.at(&op).instruction == DotInstruction::Fma &&
      (plan.where(op.operands[0]) != Placement::Shared || plan.where(op.operands[1]) != Placement::Shared))
    return fma_staging_bytes(k, op);
  return 0;
}

} // namespace

bool uses_scratch(const Kernel& k, const LoweringPlan& plan, const Op& op) {
  for (const LayoutConversion& c : plan.conversions)
    if (c.user == &op && !c.hoisted_before && c.scratch_bytes > 0)
      return true;
  return reduction_scratch_bytes(k, plan, op) > 0 || whole_tile_scratch_bytes(k, plan, op) > 0;
}

void plan_scratch(const Kernel& k, LoweringPlan& plan) {
  int64_t bytes = 0, reduction_bytes = 0;
  int reductions = 0;
  for (const LayoutConversion& c : plan.conversions)
    bytes = std::max(bytes, c.scratch_bytes);
  walk(k.body, [&](const Op& op) {
    const int64_t r = reduction_scratch_bytes(k, plan, op);
    reductions += r > 0;
    reduction_bytes = std::max(reduction_bytes, r);
    bytes = std::max(bytes, whole_tile_scratch_bytes(k, plan, op));
  });
  if (reductions > 0) {
    plan.reduction_slots = reductions >= 2 ? 2 : 1;
    plan.reduction_slot_bytes = (reduction_bytes + 15) / 16 * 16;
    // The last slot needs only the reduction's own bytes (the padding matters only before a second slot).
    bytes = std::max(bytes, (plan.reduction_slots - 1) * plan.reduction_slot_bytes + reduction_bytes);
  }
  plan.scratch_bytes = bytes;
}

} // namespace kiln
