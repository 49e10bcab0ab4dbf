#include "codegen/plan_rescale_skips.h"

#include "codegen/operand_layouts.h"

#include <unordered_set>

namespace kiln {

namespace {

// The vector that `x` broadcasts, when x is made from it by expand_dims and broadcasts alone and the thread reads
// it in its own register layout (then the factors a thread multiplies by are the registers it holds); else
// kNoValue. `want` is the layout x is read in.
ValueId broadcast_factor(const Kernel& k, const LoweringPlan& plan, ValueId x, Layout want) {
  ValueId f = x;
  for (const Op* def = k.info(f).def; def; def = k.info(f).def) {
    if (def->kind == OpKind::Broadcast)
      want = broadcast_source_layout(k, plan, def->operands[0], want);
    else if (def->kind == OpKind::ExpandDims)
      want = squeeze_layout(want, def->axis);
    else
      break;
    f = def->operands[0];
  }
  if (f == x || k.type(f).shape.empty() || plan.where(f) != Placement::Registers)
    return kNoValue;
  const Layout& have = plan.layout.at(f);
  return have.same_bases(want) && have.num_regs() <= 4 ? f : kNoValue;
}

void plan_loop(const Kernel& k, const Op& loop, LoweringPlan& plan) {
  const Region& body = loop.regions[0];
  std::unordered_set<ValueId> carried(body.args.begin() + 1, body.args.end());
  std::unordered_set<ValueId> accumulators; // the acc operands of the body's dots
  for (const auto& op : body.ops)
    if (op->kind == OpKind::Dot)
      accumulators.insert(op->operands[2]);
  for (const auto& op : body.ops) {
    if (op->kind != OpKind::Binary || op->binary != BinaryOp::Mul || k.type(op->result()).elem != DType::f32 ||
        !accumulators.count(op->result()) || plan.where(op->result()) != Placement::Registers)
      continue;
    for (int side = 0; side < 2; ++side) {
      if (!carried.count(op->operands[1 - side]))
        continue;
      ValueId f = broadcast_factor(k, plan, op->operands[side], plan.layout.at(op->result()));
      if (f != kNoValue) {
        plan.rescale_skips.ops[op.get()] = RescaleSkip{f, 1 - side};
        break;
      }
    }
  }
}

} // namespace

void plan_rescale_skips(const Kernel& k, LoweringPlan& plan) {
  if (k.config.get_or("LAZY_RESCALE", 0) == 0)
    return;
  walk(k.body, [&](const Op& op) {
    if (op.kind == OpKind::For)
      plan_loop(k, op, plan);
  });
  if (plan.rescale_skips.ops.empty())
    plan.rescale_skips.why_not = "no loop multiplies a carried dot accumulator by a broadcast row factor";
}

} // namespace kiln
