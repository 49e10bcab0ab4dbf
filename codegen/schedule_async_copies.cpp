#include "codegen/schedule_async_copies.h"

#include "codegen/wgmma.h"

namespace kiln {

namespace {

void find_unwaited_loads(const Region& r, LoweringPlan& plan) {
  auto reads_tile = [&](const Op& op, int tile) {
    bool reads = false;
    auto check = [&](const Op& o) {
      for (ValueId v : o.operands) {
        auto it = plan.tile_of.find(v);
        reads |= it != plan.tile_of.end() && it->second == tile;
      }
    };
    check(op);
    for (const Region& sub : op.regions)
      walk(sub, check);
    return reads;
  };
  for (size_t i = 0; i < r.ops.size(); ++i) {
    const Op& load = *r.ops[i];
    for (const Region& sub : load.regions)
      find_unwaited_loads(sub, plan);
    if (load.kind != OpKind::LoadBlock || plan.where(load.result()) != Placement::Shared)
      continue;
    int tile = plan.tile_of.at(load.result());
    if (plan.is_pipelined(plan.tiles[tile]))
      continue;
    for (size_t j = i + 1; j < r.ops.size(); ++j) {
      const Op& next = *r.ops[j];
      auto pit = plan.pipelined.find(&next);
      if (pit == plan.pipelined.end()) {
        if (reads_tile(next, tile) || !next.regions.empty())
          break;
        continue;
      }
      const Region& body = next.regions[0];
      bool ok = true;
      for (const auto& inner : body.ops) {
        if (inner.get() == pit->second.front())
          break; // the loop's first wait is here; reads after it are covered
        ok &= !reads_tile(*inner, tile);
      }
      if (ok)
        plan.unwaited_loads.insert(&load);
      break;
    }
  }
}

} // namespace

void schedule_async_copies(const Kernel& k, const Target& target, const CodegenOptions& options,
                           LoweringPlan& plan) {
  walk(k.body, [&](const Op& o) {
    if (const Op* d = o.kind == OpKind::For ? deferred_wgmma_dot(k, o, plan, target, options) : nullptr)
      plan.deferred_dots[&o] = d;
  });
  find_unwaited_loads(k.body, plan);
}

} // namespace kiln
