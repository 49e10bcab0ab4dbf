#include "codegen/plan_register_operands.h"

#include "codegen/defining_loops.h"
#include "codegen/wgmma.h"

#include <fmt/format.h>

#include <algorithm>

namespace kiln {

namespace {

// A product with a shared A inside a loop that does not define A: the outermost such loop around it.
struct Candidate {
  const Op* dot;
  const Op* loop;
};

// Walks the kernel with the loops open around each op, outermost first.
class CandidateFinder {
public:
  CandidateFinder(const Kernel& k, const LoweringPlan& plan) : k_(k), plan_(plan), defs_(k.body) {}

  std::vector<Candidate> find() {
    region(k_.body);
    return found_;
  }

private:
  const Kernel& k_;
  const LoweringPlan& plan_;
  std::vector<const Op*> loops_;
  std::vector<Candidate> found_;
  DefiningLoops defs_;

  // The outermost open loop that does not define `v`, or nullptr.
  const Op* hoist_target(ValueId v) const {
    const size_t i = defs_.first_invariant(loops_, [](const Op* loop) { return loop; }, v);
    return i < loops_.size() ? loops_[i] : nullptr;
  }

  void region(const Region& r) {
    for (const auto& op : r.ops) {
      if (op->kind == OpKind::Dot) {
        auto d = plan_.dots.find(op.get());
        const ValueId a = op->operands[0];
        if (d != plan_.dots.end() && d->second.instruction == DotInstruction::Wgmma &&
            plan_.where(a) == Placement::Shared)
          if (const Op* loop = hoist_target(a))
            found_.push_back({op.get(), loop});
      }
      if (op->kind == OpKind::For)
        loops_.push_back(op.get());
      for (const Region& sub : op->regions)
        region(sub);
      if (op->kind == OpKind::For)
        loops_.pop_back();
    }
  }
};

// Why the shared tile of `a` cannot be read into registers before a loop, or "".
std::string why_not_tile(const Kernel& k, const LoweringPlan& plan, ValueId a) {
  const SharedTile& t = plan.tiles[plan.tile_of.at(a)];
  if (!is_half(k.type(a).elem))
    return fmt::format("%{} is {}, not a 16-bit type ldmatrix reads", a, dtype_name(k.type(a).elem));
  if (plan.is_pipelined(t))
    return fmt::format("%{} is a ring's stage", a);
  if (plan.unwaited_loads.count(t.load))
    return fmt::format("%{} is waited for by a later loop's first wait, not where it is loaded", a);
  if (plan.persistent.prefetch_of(t.load))
    return fmt::format("%{} is copied for the next program of a persistent grid", a);
  return "";
}

// Whether `inner` lies in the body of loop `outer`.
bool encloses(const Op& outer, const Op& inner) {
  bool found = false;
  walk(outer.regions[0], [&](const Op& op) { found = found || &op == &inner; });
  return found;
}

// Registers a thread holds for the results of the products inside `loop` (each product's once).
int product_registers(const LoweringPlan& plan, const Op& loop) {
  int n = 0;
  walk(loop.regions[0], [&](const Op& op) {
    if (op.kind == OpKind::Dot)
      if (auto l = plan.layout.find(op.result()); l != plan.layout.end())
        n += l->second.num_regs();
  });
  return n;
}

} // namespace

void plan_register_operands(const Kernel& k, const Target& target, const CodegenOptions& options,
                            LoweringPlan& plan) {
  RegisterOperands& out = plan.register_operands;
  const std::vector<Candidate> candidates = CandidateFinder(k, plan).find();
  if (candidates.empty())
    return;
  if (!options.register_operands || !wgmma_enabled(target, options)) {
    out.why_not = "CodegenOptions::register_operands is off";
    return;
  }
  if (!plan.ws.on() || plan.ws.consumer_registers < kMinConsumerRegisters) {
    out.why_not = fmt::format("the kernel is not warp-specialised with consumers of at least {} registers",
                              kMinConsumerRegisters);
    return;
  }
  // The operands in the order their first product appears, each with the products that read it before its loop.
  struct Group {
    const Op* loop;
    ValueId value;
    std::vector<const Op*> dots;
  };
  std::vector<Group> groups;
  for (const Candidate& c : candidates) {
    const ValueId a = c.dot->operands[0];
    auto g = std::find_if(groups.begin(), groups.end(),
                          [&](const Group& x) { return x.loop == c.loop && x.value == a; });
    if (g == groups.end())
      groups.push_back({c.loop, a, {c.dot}});
    else
      g->dots.push_back(c.dot);
  }
  std::vector<std::string> why;
  for (const Group& g : groups) {
    if (std::string w = why_not_tile(k, plan, g.value); !w.empty()) {
      why.push_back(w);
      continue;
    }
    const WarpSplit& split = plan.warps_of(*g.dots.front());
    bool same = true;
    for (const Op* dot : g.dots)
      same = same && plan.warps_of(*dot).warps_m == split.warps_m && plan.warps_of(*dot).warps_n == split.warps_n;
    if (!same) {
      why.push_back(fmt::format("%{} is read by products of different warp splits", g.value));
      continue;
    }
    const Shape& shape = k.type(g.value).shape; // (M, K)
    const int64_t registers = shape[0] / (16 * split.warps_m) * (shape[1] / 16) * 4;
    if (registers > kMaxOperandRegisters) {
      why.push_back(fmt::format("%{} would take {} registers a thread (at most {})", g.value, registers,
                                kMaxOperandRegisters));
      continue;
    }
    // Live beside it: the operands read before this loop or one around it (those before a sibling loop are dead
    // by then).
    int live = 0;
    for (const auto& [loop, operands] : out.before)
      if (loop == g.loop || encloses(*loop, *g.loop))
        for (const RegisterOperands::Operand& o : operands)
          live += o.registers;
    if (live + registers > kMaxRegisters) {
      why.push_back(fmt::format("%{} would take the operands past {} registers a thread", g.value, kMaxRegisters));
      continue;
    }
    const int products = product_registers(plan, *g.loop);
    const int room = plan.ws.consumer_registers - kRegistersBesideProducts;
    if (products + live + registers > room) {
      why.push_back(fmt::format("%{}'s {} registers beside the loop's products' {} and the operands' {} would pass the "
                                "{} a consumer keeps for them ({} less {})",
                                g.value, registers, products, live, room, plan.ws.consumer_registers,
                                kRegistersBesideProducts));
      continue;
    }
    out.before[g.loop].push_back({g.value, split, static_cast<int>(registers)});
    out.products.insert(g.dots.begin(), g.dots.end());
  }
  if (!why.empty()) { // once each (a value before several sibling loops says it each time)
    std::vector<std::string> once;
    for (const std::string& w : why)
      if (std::find(once.begin(), once.end(), w) == once.end())
        once.push_back(w);
    out.why_not = fmt::format("{}", fmt::join(once, "; "));
  }
}

} // namespace kiln
