#include "codegen/operand_layouts.h"

#include "support/error.h"

namespace kiln {

Layout register_or_default_layout(const Kernel& k, const LoweringPlan& plan, ValueId v) {
  if (plan.where(v) == Placement::Registers)
    return plan.layout.at(v);
  const Type& t = k.type(v);
  return default_layout(t.shape, t.elem, plan.num_warps);
}

Layout reduce_input_layout(const Kernel& k, const LoweringPlan& plan, const Op& reduce) {
  return register_or_default_layout(k, plan, reduce.operands[0]);
}

Layout access_layout(const Kernel& k, const LoweringPlan& plan, const Op& access) {
  switch (access.kind) {
  case OpKind::Load:
  case OpKind::LoadBlock:
    return plan.layout.at(access.result());
  case OpKind::AtomicAdd:
    // A value not in registers is recomputed in the layout of the old values the atomic returns.
    if (plan.where(access.operands[1]) != Placement::Registers)
      return plan.layout.at(access.result());
    return plan.layout.at(access.operands[1]);
  case OpKind::Store:
  case OpKind::StoreBlock:
  case OpKind::AtomicAddBlock:
    return register_or_default_layout(k, plan, access.operands[1]);
  default:
    throw InternalError(fmt::format("access_layout: {} is not a global access", op_name(access.kind)));
  }
}

ValueId dot_a_register_value(const Kernel& k, const LoweringPlan& plan, const Op& dot) {
  const ValueId a = dot.operands[0];
  return plan.fused_casts.count(a) ? k.info(a).def->operands[0] : a;
}

Layout dot_a_layout(const Kernel& k, const LoweringPlan& plan, const Op& dot) {
  const ValueId a = dot.operands[0];
  if (plan.dots.at(&dot).instruction == DotInstruction::Fma)
    return register_or_default_layout(k, plan, a);
  const Shape& s = k.type(a).shape;
  return mma_a_layout(s[0], s[1], plan.warps_of(dot), k.type(a).elem);
}

Layout dot_b_layout(const Kernel& k, const LoweringPlan& plan, const Op& dot) {
  const ValueId b = dot.operands[1];
  if (plan.dots.at(&dot).instruction == DotInstruction::Fma)
    return register_or_default_layout(k, plan, b);
  const Shape& s = k.type(b).shape;
  return mma_b_layout(s[0], s[1], plan.warps_of(dot), k.type(b).elem);
}

Layout broadcast_source_layout(const Kernel& k, const LoweringPlan& plan, ValueId source, const Layout& want) {
  const Shape& shape = k.type(source).shape;
  if (plan.where(source) != Placement::Flexible)
    return collapse_layout(want, shape);
  Layout src = want;
  src.shape = shape;
  for (auto* bases : {&src.reg, &src.lane, &src.warp})
    for (Coord& c : *bases)
      for (size_t d = 0; d < c.size(); ++d)
        if (src.shape[d] == 1)
          c[d] = 0;
  return src;
}

} // namespace kiln
