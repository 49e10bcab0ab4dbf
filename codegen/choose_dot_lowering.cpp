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

namespace {

// A dot that wgmma refuses because a warpgroup's slice of its N-major B is not whole lines (the fused backward's
// dQ = dS K at D = 64: two warpgroups of 32 columns, 64 bytes, of K's 128-byte lines) has B's tile stored in lines
// of the slice's width (a 64- or 32-byte swizzle), where that makes the dot a wgmma and takes wgmma from no other
// dot that reads the tile.
void narrow_lines_for_warpgroup_slices(const Kernel& k, const Target& target, const CodegenOptions& options,
                                       LoweringPlan& plan) {
  if (!wgmma_enabled(target, options))
    return;
  std::vector<const Op*> dots;
  walk(k.body, [&](const Op& op) {
    if (op.kind == OpKind::Dot)
      dots.push_back(&op);
  });
  for (const Op* dot : dots) {
    const ValueId b = dot->operands[1];
    if (dot_uses_wgmma(k, *dot, plan, target, options) || plan.where(b) != Placement::Shared ||
        plan.contiguous_dim(b) != 1)
      continue;
    SharedTile& t = plan.tiles[plan.tile_of.at(b)];
    const int64_t slice = k.type(b).shape[1] / plan.warps_of(*dot).warps_n * t.elem_bytes;
    if ((slice != 32 && slice != 64) || slice >= t.geometry().line_bytes())
      continue;
    std::vector<const Op*> readers; // the tile's other wgmma dots, which must stay wgmma
    for (const Op* other : dots)
      if (other != dot && dot_uses_wgmma(k, *other, plan, target, options))
        for (ValueId v : {other->operands[0], other->operands[1]})
          if (plan.where(v) == Placement::Shared && plan.tile_of.count(v) && plan.tile_of.at(v) == plan.tile_of.at(b))
            readers.push_back(other);
    const int64_t before = t.line_cap;
    t.line_cap = slice;
    bool keep = dot_uses_wgmma(k, *dot, plan, target, options);
    for (const Op* other : readers)
      keep = keep && dot_uses_wgmma(k, *other, plan, target, options);
    if (!keep)
      t.line_cap = before;
  }
}

} // namespace

void choose_dot_lowering(const Kernel& k, const Target& target, const CodegenOptions& options,
                         LoweringPlan& plan) {
  narrow_lines_for_warpgroup_slices(k, target, options, plan);
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
