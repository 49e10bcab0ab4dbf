#include "codegen/plan_persistent_grid.h"

#include <fmt/format.h>

namespace kiln {

void plan_persistent_grid(const Kernel& k, const CodegenOptions& options, LoweringPlan& plan) {
  PersistentGrid& p = plan.persistent;
  p = PersistentGrid{};
  if (k.config.get_or("PERSISTENT", 0) == 0)
    return;
  if (!options.persistent) {
    p.why_not = "CodegenOptions::persistent is off";
    return;
  }
  const Op* other_axis = nullptr;
  walk(k.body, [&](const Op& op) {
    if ((op.kind == OpKind::ProgramId || op.kind == OpKind::NumPrograms) && op.axis != 0 && !other_axis)
      other_axis = &op;
  });
  if (other_axis) {
    p.why_not = fmt::format("{}({}) at {}: a persistent grid walks program ids along x only",
                            other_axis->kind == OpKind::ProgramId ? "program_id" : "num_programs", other_axis->axis,
                            other_axis->loc.str());
    return;
  }
  p.on = true;
  p.ctas_per_sm = static_cast<int>(k.config.get_or("MIN_BLOCKS_PER_SM", 1));
}

} // namespace kiln
