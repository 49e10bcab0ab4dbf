#include "codegen/plan_warp_uniform_scalars.h"

namespace kiln {

namespace {

bool issues_wgmma(const Op& loop, const LoweringPlan& plan) {
  bool found = false;
  walk(loop.regions[0], [&](const Op& op) { found |= plan.on_wgmma(op); });
  return found;
}

} // namespace

void plan_warp_uniform_scalars(const Kernel& k, const CodegenOptions& options, LoweringPlan& plan) {
  WarpUniformScalars& u = plan.uniform;
  u = WarpUniformScalars{};
  if (!options.warp_uniform || !plan.any_wgmma())
    return;
  walk(k.body, [&](const Op& op) {
    if (op.kind == OpKind::Load && plan.where(op.result()) == Placement::Scalar)
      u.loads.insert(&op);
    if (op.kind != OpKind::For || !issues_wgmma(op, plan))
      return;
    std::vector<int> bounds;
    for (int i : {0, 1}) { // lo, hi
      const Op* def = k.info(op.operands[i]).def;
      if (!def || def->kind != OpKind::Constant)
        bounds.push_back(i);
    }
    if (!bounds.empty())
      u.loop_bounds[&op] = bounds;
  });
}

} // namespace kiln
