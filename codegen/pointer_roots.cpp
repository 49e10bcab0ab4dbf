#include "codegen/pointer_roots.h"

#include <fmt/format.h>

namespace kiln {

namespace {
// The yield that ends region r, if any.
const Op* yield_of(const Region& r) {
  return !r.ops.empty() && r.ops.back()->kind == OpKind::Yield ? r.ops.back().get() : nullptr;
}
} // namespace

PointerRoots::PointerRoots(const Kernel& k) : k_(k) {
  walk(k.body, [&](const Op& op) {
    used_.insert(op.operands.begin(), op.operands.end());
    if (op.kind == OpKind::For) { // body args: iv, then the carried values (inits at operand 3 + i)
      const Region& body = op.regions[0];
      for (size_t i = 1; i < body.args.size(); ++i)
        carried_[body.args[i]] = {&op, i - 1};
    }
  });
}

std::optional<std::set<int>> PointerRoots::of(ValueId v) {
  std::set<int> roots;
  std::set<ValueId> seen;
  if (!collect(v, roots, seen))
    return std::nullopt;
  return roots;
}

std::optional<std::set<int>> PointerRoots::through(const std::function<bool(const Op&)>& pick) {
  std::set<int> all;
  bool traced = true;
  walk(k_.body, [&](const Op& op) {
    if (!pick(op))
      return;
    if (std::optional<std::set<int>> r = of(op.operands[0]))
      all.insert(r->begin(), r->end());
    else
      traced = false;
  });
  return traced ? std::optional(all) : std::nullopt;
}

std::optional<std::set<int>> PointerRoots::written() {
  if (!written_)
    written_ = through([](const Op& op) {
      return op.kind == OpKind::Store || op.kind == OpKind::AtomicAdd || op.kind == OpKind::StoreBlock ||
             op.kind == OpKind::AtomicAddBlock;
    });
  return *written_;
}

bool PointerRoots::reduces(const Op& op) const {
  return op.kind == OpKind::AtomicAddBlock || (op.kind == OpKind::AtomicAdd && !used_.count(op.result()));
}

std::string PointerRoots::why_read_back(ValueId v, const char* lands) {
  const std::optional<std::set<int>> mine = of(v);
  if (!mine)
    return "its block pointer's base is not known to come from a pointer parameter";
  const std::optional<std::set<int>> r = read(); // unknown: any parameter may be read
  for (int p : *mine)
    if (!r || r->count(p))
      return fmt::format("the kernel also reads through '{}', and {} asynchronously",
                         k_.params[static_cast<size_t>(p)].name, lands);
  return "";
}

std::optional<std::set<int>> PointerRoots::read() {
  if (!read_)
    read_ = through([&](const Op& op) {
      return op.kind == OpKind::Load || op.kind == OpKind::LoadBlock ||
             (op.kind == OpKind::AtomicAdd && !reduces(op));
    });
  return *read_;
}

bool PointerRoots::never_written(ValueId v) {
  const std::optional<std::set<int>> roots = of(v), w = written();
  if (!roots || !w)
    return false;
  for (int p : *roots)
    if (w->count(p))
      return false;
  return true;
}

bool PointerRoots::collect_carried(const Op& loop, size_t i, std::set<int>& roots, std::set<ValueId>& seen) {
  const Op* y = yield_of(loop.regions[0]);
  return collect(loop.operands[3 + i], roots, seen) && (!y || collect(y->operands[i], roots, seen));
}

bool PointerRoots::collect(ValueId v, std::set<int>& roots, std::set<ValueId>& seen) {
  if (!seen.insert(v).second)
    return true;
  const ValueInfo& info = k_.info(v);
  if (info.param_index >= 0) {
    roots.insert(info.param_index);
    return true;
  }
  if (auto it = carried_.find(v); it != carried_.end())
    return collect_carried(*it->second.first, it->second.second, roots, seen);
  const Op* def = info.def;
  if (!def)
    return false;
  switch (def->kind) {
  case OpKind::AddPtr:
  case OpKind::MakeBlockPtr:
  case OpKind::Advance:
  case OpKind::Broadcast:
  case OpKind::ExpandDims:
  case OpKind::Trans:
  case OpKind::Reshape:
    return collect(def->operands[0], roots, seen);
  case OpKind::Where:
    return collect(def->operands[1], roots, seen) && collect(def->operands[2], roots, seen);
  case OpKind::For:
    for (size_t i = 0; i < def->results.size(); ++i)
      if (def->results[i] == v)
        return collect_carried(*def, i, roots, seen);
    return false;
  case OpKind::If:
    for (size_t i = 0; i < def->results.size(); ++i)
      if (def->results[i] == v) {
        for (const Region& r : def->regions)
          if (const Op* y = yield_of(r); y && !collect(y->operands[i], roots, seen))
            return false;
        return true;
      }
    return false;
  default:
    return false;
  }
}

} // namespace kiln
