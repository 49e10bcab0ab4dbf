#include "codegen/plan_products_ahead.h"

#include <fmt/format.h>

#include <set>

namespace kiln {

namespace {

// Every op inside `loop`'s body, nested regions included.
std::set<const Op*> ops_inside(const Op& loop) {
  std::set<const Op*> inside;
  walk(loop.regions[0], [&](const Op& op) { inside.insert(&op); });
  return inside;
}

// The first product of `loop`'s body, at its top level, or nullptr.
const Op* first_product(const Op& loop) {
  for (const auto& op : loop.regions[0].ops)
    if (op->kind == OpKind::Dot)
      return op.get();
  return nullptr;
}

} // namespace

std::string why_product_needs_the_iteration(const Kernel& k, const LoweringPlan& plan, const Op& loop, const Op& dot) {
  const std::string at = fmt::format("the first product of the loop at {} (dot at {})", loop.loc.str(), dot.loc.str());
  if (plan.dots.at(&dot).instruction != DotInstruction::Wgmma)
    return at + " is not on wgmma";
  if (plan.is_deferred_dot(dot))
    return at + " is a chain left in flight across iterations";
  if (k.type(dot.result()).elem != DType::f32)
    return at + " does not accumulate in f32";
  const std::set<const Op*> inside = ops_inside(loop);
  const ValueId a = dot.operands[0], b = dot.operands[1], c = dot.operands[2];
  if (const Op* def = k.info(a).def; def && inside.count(def))
    return at + fmt::format(": A (%{}) is computed in the loop", a);
  const std::vector<const Op*>& ring = plan.pipelined.at(&loop);
  auto tile = plan.tile_of.find(b);
  if (plan.where(b) != Placement::Shared || tile == plan.tile_of.end() ||
      std::find(ring.begin(), ring.end(), plan.tiles[tile->second].load) == ring.end())
    return at + fmt::format(": B (%{}) is not one of the loop's ring tiles", b);
  if (const Op* def = k.info(c).def; !def || def->kind != OpKind::Constant)
    return at + fmt::format(": its accumulator (%{}) is not a constant", c);
  return "";
}

void plan_products_ahead(const Kernel& k, const CodegenOptions& options, LoweringPlan& plan) {
  ProductsAhead& ahead = plan.ahead;
  ahead = ProductsAhead{};
  if (k.config.get_or("PRODUCT_AHEAD", 0) == 0)
    return;
  const WarpSpecialization& ws = plan.ws;
  if (!options.product_ahead) {
    ahead.why_not = "CodegenOptions::product_ahead is off";
    return;
  }
  if (!ws.on()) {
    ahead.why_not =
        "the kernel is not warp-specialised (a slot is waited for early only on the producer's barriers; " +
        ws.why_off() + ")";
    return;
  }
  std::map<const Op*, const Op*> dots;
  for (const Op* loop : ws.loops) {
    // A pipelined loop's ring has two or more stages (assign_layouts), so slot i + 1 is never slot i.
    KILN_INTERNAL_CHECK(plan.ring_tile(loop).stages >= 2, "the loop at {} is pipelined with one stage",
                        loop->loc.str());
    const Op* dot = first_product(*loop);
    if (!dot) {
      ahead.why_not = fmt::format("the loop at {} has no product at the top of its body", loop->loc.str());
      return;
    }
    if (std::string why = why_product_needs_the_iteration(k, plan, *loop, *dot); !why.empty()) {
      ahead.why_not = why;
      return;
    }
    dots[loop] = dot;
  }
  ahead.dots = std::move(dots);
}

} // namespace kiln
