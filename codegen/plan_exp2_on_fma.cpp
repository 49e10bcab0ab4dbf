#include "codegen/plan_exp2_on_fma.h"

#include <fmt/format.h>

namespace kiln {

void plan_exp2_on_fma(const Kernel& k, LoweringPlan& plan) {
  Exp2OnFma& e = plan.exp2_on_fma;
  e = Exp2OnFma{};
  e.every = static_cast<int>(k.config.get_or("EXP2_ON_FMA", 0));
  if (e.every <= 0)
    return;
  int exp2_tiles = 0;
  walk(k.body, [&](const Op& op) {
    if (op.kind != OpKind::Unary || op.unary != UnaryOp::Exp2 || k.type(op.result()).elem != DType::f32 ||
        plan.where(op.result()) != Placement::Registers)
      return;
    ++exp2_tiles;
    if (plan.layout.at(op.result()).num_regs() >= e.every)
      e.ops.insert(&op);
  });
  if (e.ops.empty())
    e.why_not = exp2_tiles == 0 ? "the kernel has no f32 exp2 tile in registers"
                                : fmt::format("no f32 exp2 tile holds {} registers a thread", e.every);
}

} // namespace kiln
