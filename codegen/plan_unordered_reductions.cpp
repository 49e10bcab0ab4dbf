#include "codegen/plan_unordered_reductions.h"

#include "codegen/pointer_roots.h"

namespace kiln {

void plan_unordered_reductions(const Kernel& k, LoweringPlan& plan) {
  PointerRoots roots(k);
  const std::optional<std::set<int>> read = roots.read();
  if (!read) // some read's pointer may come from anywhere
    return;
  walk(k.body, [&](const Op& op) {
    if (!roots.reduces(op))
      return;
    const std::optional<std::set<int>> mine = roots.of(op.operands[0]);
    if (!mine)
      return;
    for (int p : *mine)
      if (read->count(p))
        return;
    plan.unordered_reductions.insert(&op);
  });
}

} // namespace kiln
