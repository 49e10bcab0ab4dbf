#include "codegen/plan_late_products.h"

#include "codegen/plan_products_ahead.h"

#include <fmt/format.h>

#include <algorithm>

namespace kiln {

namespace {

// Whether `op` (or an op nested in its regions) reads `v`.
bool reads(const Op& op, ValueId v) {
  bool found = false;
  auto check = [&](const Op& o) {
    if (std::find(o.operands.begin(), o.operands.end(), v) != o.operands.end())
      found = true;
  };
  check(op);
  for (const Region& r : op.regions)
    walk(r, check);
  return found;
}

// Why `dot` cannot be one of `loop`'s last products ("" when it can): on wgmma with A in registers and B one of the
// loop's ring tiles, accumulating in f32 in the layout of the carried value it is yielded as (exactly one), which
// nothing after it in the body but the yield reads. `carried` is set to that value's index.
std::string why_not_last(const Kernel& k, const LoweringPlan& plan, const Op& loop, size_t pos, size_t& carried) {
  const auto& ops = loop.regions[0].ops;
  const Op& last = *ops[pos];
  const std::string last_at =
      fmt::format("the last product of the loop at {} (dot at {})", loop.loc.str(), last.loc.str());
  if (plan.dots.at(&last).instruction != DotInstruction::Wgmma)
    return last_at + " is not on wgmma";
  if (plan.is_deferred_dot(last))
    return last_at + " is a chain left in flight across iterations";
  if (k.type(last.result()).elem != DType::f32)
    return last_at + " does not accumulate in f32";
  const ValueId a = last.operands[0], b = last.operands[1], c = last.operands[2];
  if (plan.where(a) == Placement::Shared)
    return last_at + fmt::format(": A (%{}) is in shared memory, not registers", a);
  const std::vector<const Op*>& ring = plan.pipelined.at(&loop);
  auto tile = plan.tile_of.find(b);
  if (plan.where(b) != Placement::Shared || tile == plan.tile_of.end() ||
      std::find(ring.begin(), ring.end(), plan.tiles[tile->second].load) == ring.end())
    return last_at + fmt::format(": B (%{}) is not one of the loop's ring tiles", b);
  const Op& yield = *ops.back();
  const auto y = std::find(yield.operands.begin(), yield.operands.end(), last.result());
  if (y == yield.operands.end() || std::count(yield.operands.begin(), yield.operands.end(), last.result()) != 1)
    return last_at + " is not yielded as exactly one carried value";
  carried = static_cast<size_t>(y - yield.operands.begin());
  const ValueId arg = loop.regions[0].args[carried + 1];
  if (plan.where(arg) != Placement::Registers || plan.where(c) != Placement::Registers ||
      !plan.layout.at(arg).same_bases(plan.layout.at(last.result())) ||
      !plan.layout.at(c).same_bases(plan.layout.at(last.result())))
    return last_at + ": its accumulator, its result and the carried value are not in one register layout";
  for (size_t i = pos + 1; i + 1 < ops.size(); ++i)
    if (reads(*ops[i], arg) || reads(*ops[i], last.result()))
      return fmt::format("{}: the op at {} after it reads the carried value", last_at, ops[i]->loc.str());
  return "";
}

// Fills `late` with the products of `loop` issued late and returns "", or returns why they cannot be.
std::string plan_loop(const Kernel& k, const LoweringPlan& plan, const Op& loop, LateProduct& late) {
  const auto& ops = loop.regions[0].ops;
  std::vector<size_t> dots; // positions of the top-level products in the body
  for (size_t i = 0; i < ops.size(); ++i)
    if (ops[i]->kind == OpKind::Dot)
      dots.push_back(i);
  const std::string at = fmt::format("the loop at {}", loop.loc.str());
  if (dots.size() < 2)
    return at + " has fewer than two products at the top level of its body";
  // The first products: the first, then each next product that accumulates onto the one before.
  size_t n_first = 1;
  while (n_first < dots.size() && ops[dots[n_first]]->operands[2] == ops[dots[n_first - 1]]->result())
    ++n_first;
  if (std::string why = why_product_needs_the_iteration(k, plan, loop, *ops[dots.front()]); !why.empty())
    return why;
  // The last products: the longest run of products at the end of the body that can all be issued late.
  size_t first_last = dots.size();
  std::vector<size_t> carried;
  std::string why_not;
  while (first_last > n_first) {
    size_t c = 0;
    why_not = why_not_last(k, plan, loop, dots[first_last - 1], c);
    if (!why_not.empty())
      break;
    carried.insert(carried.begin(), c);
    --first_last;
  }
  if (carried.empty())
    return n_first == dots.size() ? at + ": its products are one chain, with no last product to issue late" : why_not;
  const size_t first_end = dots[n_first - 1], last_begin = dots[first_last];
  std::vector<ValueId> args;
  for (size_t c : carried)
    args.push_back(loop.regions[0].args[c + 1]);
  auto reads_carried = [&](const Op& op) {
    return std::any_of(args.begin(), args.end(), [&](ValueId arg) { return reads(op, arg); });
  };
  // Positions: the first products < first_reader < the last ones; no product sits between the first products and
  // the wait, and nothing before the first product reads a carried value.
  const Op* first_reader = nullptr;
  for (size_t i = first_end + 1; i < last_begin && !first_reader; ++i) {
    if (reads_carried(*ops[i]))
      first_reader = ops[i].get();
    else if (ops[i]->kind == OpKind::Dot)
      return fmt::format("{}: the product at {} comes between its first products and the first read of the carried "
                         "values",
                         at, ops[i]->loc.str());
  }
  for (size_t i = 0; i < dots.front(); ++i)
    if (reads_carried(*ops[i]))
      return fmt::format("{}: the op at {} reads a carried value before the first product", at, ops[i]->loc.str());
  if (!first_reader)
    return fmt::format("{}: nothing between its first and last products reads the carried values", at);
  for (size_t i = 0; i < n_first; ++i)
    late.first.push_back(ops[dots[i]].get());
  for (size_t i = first_last; i < dots.size(); ++i)
    late.last.push_back(ops[dots[i]].get());
  late.first_reader = first_reader;
  late.carried = std::move(carried);
  return "";
}

// How many times `v` is an operand anywhere in `region` (nested regions included).
size_t uses(const Region& region, ValueId v) {
  size_t n = 0;
  walk(region, [&](const Op& o) { n += static_cast<size_t>(std::count(o.operands.begin(), o.operands.end(), v)); });
  return n;
}

// Why `next`, the loop after `loop` in `region`, cannot issue `loop`'s last iteration's late products in its first
// iteration ("" when it can): both loops' late products must be alike (the same ring tile and shared bytes for B, A
// in one layout, one accumulator layout), `next`'s carried accumulators must start from `loop`'s and nothing else
// read them, and the ops between the loops must be scalar work only.
std::string why_not_continued(const Kernel& k, const LoweringPlan& plan, const Region& region, const Op& loop,
                              const LateProduct& a, const Op& next, const LateProduct& b) {
  const std::string pair = fmt::format("the loops at {} and {}", loop.loc.str(), next.loc.str());
  if (a.first.size() != b.first.size() || a.last.size() != b.last.size())
    return pair + " have different numbers of first or late products";
  if (plan.tma.loops.at(&loop) != plan.tma.loops.at(&next))
    return pair + " copy through different rings";
  for (size_t i = 0; i < a.last.size(); ++i) {
    const Op &x = *a.last[i], &y = *b.last[i];
    const SharedTile &bx = plan.tiles[plan.tile_of.at(x.operands[1])], &by = plan.tiles[plan.tile_of.at(y.operands[1])];
    if (bx.offset != by.offset || bx.stages != by.stages || bx.bytes_per_stage() != by.bytes_per_stage() ||
        plan.ring_tile_index(&loop, bx.load) != plan.ring_tile_index(&next, by.load))
      return fmt::format("{}: the late products at {} and {} read B from different shared tiles", pair,
                         x.loc.str(), y.loc.str());
    if (!(k.type(x.operands[0]) == k.type(y.operands[0])) || !(k.type(x.result()) == k.type(y.result())) ||
        !plan.layout.at(x.operands[0]).same_bases(plan.layout.at(y.operands[0])) ||
        !plan.layout.at(x.result()).same_bases(plan.layout.at(y.result())))
      return fmt::format("{}: the late products at {} and {} differ in A's or the accumulator's type or layout", pair,
                         x.loc.str(), y.loc.str());
    const ValueId acc = loop.results[a.carried[i]];
    if (next.operands[3 + b.carried[i]] != acc || uses(region, acc) != 1)
      return fmt::format("{}: the loop at {} does not start its accumulator from the first loop's alone", pair,
                         next.loc.str());
  }
  const auto at = [&](const Op& op) {
    return std::find_if(region.ops.begin(), region.ops.end(), [&](const auto& o) { return o.get() == &op; });
  };
  for (auto it = at(loop) + 1; it != at(next); ++it) {
    const Op& between = **it;
    const bool scalar = !between.results.empty() && between.regions.empty() &&
                        std::all_of(between.results.begin(), between.results.end(), [&](ValueId r) {
                          return k.type(r).is_scalar() || k.type(r).is_block_ptr();
                        });
    if (!scalar)
      return fmt::format("{}: the op at {} between them is not scalar work", pair, between.loc.str());
  }
  return "";
}

// Links each late loop to the next loop of its region where that one can issue its last iteration's late products
// (LateProduct::continued_by); records the first pair that cannot.
void plan_across_loops(const Kernel& k, LoweringPlan& plan) {
  LateProducts& late = plan.late;
  auto visit = [&](const Region& region, auto& self) -> void {
    const Op* previous = nullptr; // the region's last late loop so far, while only scalar work follows it
    for (const auto& o : region.ops) {
      for (const Region& r : o->regions)
        self(r, self);
      auto it = late.loops.find(o.get());
      if (it == late.loops.end()) {
        if (o->kind == OpKind::For || !o->regions.empty())
          previous = nullptr;
        continue;
      }
      if (previous) {
        LateProduct& a = late.loops.at(previous);
        const std::string why = why_not_continued(k, plan, region, *previous, a, *o, it->second);
        if (why.empty()) {
          a.continued_by = o.get();
          it->second.continues = previous;
        } else if (late.why_not_across_loops.empty()) {
          late.why_not_across_loops = why;
        }
      }
      previous = o.get();
    }
  };
  visit(k.body, visit);
}

} // namespace

void plan_late_products(const Kernel& k, const CodegenOptions& options, LoweringPlan& plan) {
  LateProducts& late = plan.late;
  late = LateProducts{};
  if (k.config.get_or("LAST_PRODUCT_LATE", 0) == 0)
    return;
  const WarpSpecialization& ws = plan.ws;
  if (!options.late_product) {
    late.why_not = "CodegenOptions::late_product is off";
    return;
  }
  if (!ws.on()) {
    late.why_not = "the kernel is not warp-specialised (a slot is kept an iteration longer only on the producer's "
                   "barriers; " +
                   ws.why_off() + ")";
    return;
  }
  if (plan.ahead.on()) {
    late.why_not = "PRODUCT_AHEAD is on: it reorders the same products";
    return;
  }
  std::map<const Op*, LateProduct> loops;
  for (const Op* loop : ws.loops) {
    LateProduct p;
    if (std::string why = plan_loop(k, plan, *loop, p); !why.empty()) {
      late.why_not = why;
      return;
    }
    if (plan.pingpong.on() && (p.first.size() > 1 || p.last.size() > 1)) {
      late.why_not = fmt::format("the loop at {} has {} first and {} last products: ping-pong turns are built for "
                                 "one of each",
                                 loop->loc.str(), p.first.size(), p.last.size());
      return;
    }
    loops[loop] = p;
  }
  late.loops = std::move(loops);
  if (late.loops.size() < 2)
    return;
  if (!options.late_across_loops)
    late.why_not_across_loops = "CodegenOptions::late_across_loops is off";
  else if (plan.pingpong.on())
    late.why_not_across_loops = "PINGPONG is on: its turns are built for one loop at a time";
  else
    plan_across_loops(k, plan);
}

} // namespace kiln
