#include "codegen/schedule_products.h"

#include "codegen/plan_scratch.h"

#include <algorithm>
#include <map>
#include <set>

namespace kiln {

namespace {

// Whether the emitter computes `v` where it is read rather than where it is defined: a flexible value, or a cast
// packed into a product's A. A read of such a value is a read of what it is made from.
bool computed_at_use(const LoweringPlan& plan, ValueId v) {
  return plan.where(v) == Placement::Flexible || plan.fused_casts.count(v) > 0;
}

// Whether `op` emits nothing a product must be issued after, so that it may move up with a product that reads it:
// a ring stage's load that does not wait for the slot (the stage is there once the slot's wait is), a trans or
// expand_dims of a shared tile, a constant, a value computed where it is read.
bool moves_with_a_product(const LoweringPlan& plan, const Op& op) {
  if (op.kind == OpKind::Constant)
    return true;
  const ValueId r = op.result();
  if (r == kNoValue || !op.regions.empty())
    return false;
  if (computed_at_use(plan, r))
    return true;
  if (plan.where(r) != Placement::Shared)
    return false;
  if (op.kind == OpKind::Trans || op.kind == OpKind::ExpandDims)
    return true;
  auto tile = plan.tile_of.find(r);
  return op.kind == OpKind::LoadBlock && tile != plan.tile_of.end() && plan.is_pipelined(plan.tiles[tile->second]) &&
         plan.loop_waiting_at(&op) == nullptr;
}

// Whether `op` may overwrite a shared tile a product in flight reads: a block load into a tile (kept in shared
// memory, or staged through it) that is not a ring's stage (those are written only after their slot is released).
bool writes_a_shared_tile(const LoweringPlan& plan, const Op& op) {
  if (op.kind != OpKind::LoadBlock)
    return false;
  auto tile = plan.tile_of.find(op.result());
  return tile != plan.tile_of.end() && !plan.is_pipelined(plan.tiles[tile->second]);
}

// Whether no product is moved above `op`: an op with regions, a write of a shared tile, the wait for a ring slot.
bool products_stay_below(const LoweringPlan& plan, const Op& op) {
  return !op.regions.empty() || writes_a_shared_tile(plan, op) || plan.loop_waiting_at(&op) != nullptr;
}

// Whether another pass plans the order of issue of `loop`'s products (one issued an iteration ahead, the last ones
// late, a chain left in flight across iterations, products issued in turn): its waits are that pass's.
bool issue_planned_elsewhere(const LoweringPlan& plan, const Op& loop) {
  if (plan.ahead.dots.count(&loop) || plan.late.loops.count(&loop) || plan.deferred_dots.count(&loop))
    return true;
  for (const auto& op : loop.regions[0].ops)
    if (plan.pingpong.dots.count(op.get()))
      return true;
  return false;
}

// Whether `dot` must be waited for at its issue (and stays where the program computes it): its A is staged in the
// scratch, which other ops of `body` reuse. Where its staging is the body's only use of the scratch, the next use
// is the next iteration's staging, which begins with a barrier every thread passes only after its wait for the
// product (at its first reader, or the body's end): it stays in flight like any other.
bool waits_at_issue(const Kernel& k, const LoweringPlan& plan, const Region& body, const Op& dot) {
  bool staged = false;
  for (const LayoutConversion& c : plan.conversions)
    staged |= c.user == &dot && c.method == ConversionMethod::SharedOperand;
  if (!staged)
    return false;
  bool others = false;
  walk(body, [&](const Op& op) { others |= &op != &dot && uses_scratch(k, plan, op); });
  return others;
}

// Whether `op` makes a layout conversion (in place, not hoisted before a loop) of a value that `dot` or the ops
// moving with it read.
bool converts_what_it_reads(const LoweringPlan& plan, const Op& op, const Op& dot, const std::set<const Op*>& with) {
  auto read_by_product = [&](ValueId v) {
    auto reads = [v](const Op* o) { return std::find(o->operands.begin(), o->operands.end(), v) != o->operands.end(); };
    return reads(&dot) || std::any_of(with.begin(), with.end(), reads);
  };
  for (const LayoutConversion& c : plan.conversions)
    if (c.user == &op && !c.hoisted_before && read_by_product(c.value))
      return true;
  return false;
}

// The body's ops in program order, each wgmma product (with the ops that move with it) moved up to right after its
// anchor: the latest of the ops it must follow (its operands' other definitions, and the ops no product moves above),
// after the products already moved there (products with one anchor keep their program order).
std::vector<const Op*> issue_early(const Kernel& k, const LoweringPlan& plan, const Region& body,
                                   ProductSchedule& schedule) {
  std::vector<const Op*> order;
  for (const auto& op : body.ops)
    order.push_back(op.get());
  const std::set<const Op*> in_body(order.begin(), order.end());
  std::vector<const Op*> products;
  for (const Op* op : order)
    if (plan.on_wgmma(*op) && !waits_at_issue(k, plan, body, *op))
      products.push_back(op);
  auto position = [&](const Op* op) {
    return op ? std::find(order.begin(), order.end(), op) - order.begin() : std::ptrdiff_t{-1};
  };
  std::map<const Op*, const Op*> last_moved_after; // anchor -> the last product placed after it
  for (const Op* dot : products) {
    const std::ptrdiff_t at = position(dot);
    std::set<const Op*> with; // the ops that move with it
    const Op* anchor = nullptr;
    auto follow = [&](const Op* op) {
      if (position(op) > position(anchor))
        anchor = op;
    };
    std::vector<ValueId> todo(dot->operands.begin(), dot->operands.end());
    while (!todo.empty()) {
      const Op* def = k.info(todo.back()).def;
      todo.pop_back();
      if (!def || !in_body.count(def) || with.count(def))
        continue;
      if (moves_with_a_product(plan, *def)) {
        with.insert(def);
        todo.insert(todo.end(), def->operands.begin(), def->operands.end());
      } else {
        follow(def);
      }
    }
    for (std::ptrdiff_t i = 0; i < at; ++i)
      if (products_stay_below(plan, *order[static_cast<size_t>(i)]))
        follow(order[static_cast<size_t>(i)]);
    auto tail = last_moved_after.find(anchor);
    const std::ptrdiff_t after = tail != last_moved_after.end() && position(tail->second) > position(anchor)
                                     ? position(tail->second)
                                     : position(anchor);
    // Moved only past something it need not wait for (not past ops that move with it alone), and not past an op
    // that converts a value it reads: plan_layout_conversions planned that conversion at the first reader in
    // program order, which the moved product would then precede.
    bool worth_it = false, passes_a_conversion = false;
    for (std::ptrdiff_t i = after + 1; i < at; ++i) {
      const Op* passed = order[static_cast<size_t>(i)];
      worth_it |= !with.count(passed);
      passes_a_conversion |= !with.count(passed) && converts_what_it_reads(plan, *passed, *dot, with);
    }
    last_moved_after[anchor] = dot; // where a later product with this anchor goes after
    if (!worth_it || passes_a_conversion)
      continue;
    std::vector<const Op*> moved; // in their order
    for (std::ptrdiff_t i = after + 1; i <= at; ++i)
      if (order[static_cast<size_t>(i)] == dot || with.count(order[static_cast<size_t>(i)]))
        moved.push_back(order[static_cast<size_t>(i)]);
    std::vector<const Op*> next(order.begin(), order.begin() + after + 1);
    next.insert(next.end(), moved.begin(), moved.end());
    for (size_t i = static_cast<size_t>(after + 1); i < order.size(); ++i)
      if (std::find(moved.begin(), moved.end(), order[i]) == moved.end())
        next.push_back(order[i]);
    order = std::move(next);
    schedule.issued_after[dot] = after >= 0 ? order[static_cast<size_t>(after)] : nullptr;
  }
  return order;
}

// The values `op` reads when it is emitted, through values computed where they are read (within the body).
std::set<ValueId> values_read(const Kernel& k, const LoweringPlan& plan, const Op& op, const std::set<const Op*>& body) {
  std::set<ValueId> read;
  std::vector<ValueId> todo(op.operands.begin(), op.operands.end());
  while (!todo.empty()) {
    const ValueId v = todo.back();
    todo.pop_back();
    if (!read.insert(v).second)
      continue;
    const Op* def = k.info(v).def;
    if (def && body.count(def) && computed_at_use(plan, v))
      todo.insert(todo.end(), def->operands.begin(), def->operands.end());
  }
  return read;
}

// Where each product of `order` (a loop body's ops as emitted) is waited for.
void wait_at_first_use(const Kernel& k, const LoweringPlan& plan, const Op& loop, const std::vector<const Op*>& order,
                       ProductSchedule& schedule) {
  const std::set<const Op*> in_body(order.begin(), order.end());
  std::vector<const Op*> in_flight; // in the order committed
  auto wait_before = [&](const Op& op, size_t retired) {
    // The `retired` oldest products are done, the rest stay in flight.
    std::vector<const Op*> done(in_flight.begin(), in_flight.begin() + static_cast<std::ptrdiff_t>(retired));
    in_flight.erase(in_flight.begin(), in_flight.begin() + static_cast<std::ptrdiff_t>(retired));
    schedule.before[&op] = ProductWait{static_cast<int>(in_flight.size()), std::move(done)};
  };
  for (const Op* op : order) {
    if (op->kind == OpKind::Yield || in_flight.empty()) {
      // nothing in flight to wait for
    } else if (!op->regions.empty() || writes_a_shared_tile(plan, *op)) {
      wait_before(*op, in_flight.size());
    } else {
      const std::set<ValueId> read = values_read(k, plan, *op, in_body);
      size_t retired = 0;
      for (size_t i = 0; i < in_flight.size(); ++i)
        if (read.count(in_flight[i]->result()))
          retired = i + 1;
      if (retired > 0)
        wait_before(*op, retired);
    }
    if (!plan.on_wgmma(*op))
      continue;
    if (waits_at_issue(k, plan, loop.regions[0], *op)) {
      in_flight.clear(); // its wgmma_wait<0> retires every product before it too
      continue;
    }
    schedule.in_flight.insert(op);
    in_flight.push_back(op);
  }
  if (!in_flight.empty())
    schedule.at_end[&loop] = in_flight;
}

} // namespace

void schedule_products(const Kernel& k, const CodegenOptions& options, LoweringPlan& plan) {
  plan.products = ProductSchedule{};
  if (!options.product_schedule || !plan.any_wgmma())
    return;
  const bool in_order = k.config.get_or("PRODUCTS_IN_ORDER", 0) != 0;
  walk(k.body, [&](const Op& loop) {
    if (loop.kind != OpKind::For || issue_planned_elsewhere(plan, loop))
      return;
    std::vector<const Op*> order;
    if (in_order)
      for (const auto& op : loop.regions[0].ops)
        order.push_back(op.get());
    else
      order = issue_early(k, plan, loop.regions[0], plan.products);
    wait_at_first_use(k, plan, loop, order, plan.products);
    bool moved = false;
    for (size_t i = 0; i < order.size(); ++i)
      moved |= order[i] != loop.regions[0].ops[i].get();
    if (moved)
      plan.products.order[&loop] = std::move(order);
  });
}

} // namespace kiln
