#include "codegen/choose_dot_lowering.h"

#include "codegen/wgmma.h"

namespace kiln {

const char* dot_instruction_name(DotInstruction i) {
  switch (i) {
  case DotInstruction::Wgmma:
    return "wgmma";
  case DotInstruction::MmaSync:
    return "mma.sync";
  case DotInstruction::Fma:
    break;
  }
  return "fma";
}

bool dot_below_mma_tile(const Kernel& k, const Op& dot) {
  const Shape& a = k.type(dot.operands[0]).shape;
  const Shape& b = k.type(dot.operands[1]).shape;
  return a[0] < 16 || a[1] < 16 || b[1] < 16;
}

void choose_dot_lowering(const Kernel& k, const Target& target, const CodegenOptions& options,
                         LoweringPlan& plan) {
  walk(k.body, [&](const Op& op) {
    if (op.kind != OpKind::Dot)
      return;
    DotPlan d;
    const DType in = k.type(op.operands[0]).elem;
    const bool mma = options.tensor_cores && (is_half(in) || (in == DType::f32 && op.tf32)) &&
                     plan.layout.at(op.result()).kind == LayoutKind::Mma &&
                     !plan.layout.at(op.result()).collapsed;
    std::string why;
    if (dot_uses_wgmma(k, op, plan, target, options, &why))
      d.instruction = DotInstruction::Wgmma;
    else if (mma)
      d.instruction = DotInstruction::MmaSync;
    if (d.instruction == DotInstruction::MmaSync && wgmma_enabled(target, options) && is_half(in))
      d.why_not_wgmma = why;
    plan.dots[&op] = d;
  });

  if (!options.tensor_cores)
    return;
  std::unordered_map<ValueId, int> uses;
  walk(k.body, [&](const Op& o) {
    for (ValueId v : o.operands)
      ++uses[v];
  });
  walk(k.body, [&](const Op& o) {
    if (o.kind != OpKind::Dot || o.tf32)
      return;
    ValueId a = o.operands[0];
    const Op* def = k.info(a).def;
    if (def && def->kind == OpKind::Cast && uses[a] == 1 && k.type(def->operands[0]).elem == DType::f32 &&
        is_half(k.type(a).elem) && plan.where(a) == Placement::Registers &&
        plan.where(def->operands[0]) == Placement::Registers)
      plan.fused_casts.insert(a);
  });
}

} // namespace kiln
