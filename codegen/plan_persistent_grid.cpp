#include "codegen/plan_persistent_grid.h"

#include "codegen/pointer_roots.h"
#include "codegen/program_scalars.h"

#include <fmt/format.h>

#include <optional>
#include <set>

namespace kiln {

namespace {

// Whether `op`, or an op in its regions, reads shared tile `tile` (its value or a view of it).
bool reads_tile(const LoweringPlan& plan, const Op& op, int tile) {
  bool reads = false;
  auto check = [&](const Op& o) {
    for (ValueId v : o.operands)
      if (auto t = plan.tile_of.find(v); t != plan.tile_of.end() && t->second == tile && o.kind != OpKind::LoadBlock)
        reads = true;
  };
  check(op);
  for (const Region& r : op.regions)
    walk(r, check);
  return reads;
}

// The next program's copy of each shared tile loaded once, before the loops (PersistentPrefetch); why_not_prefetch
// names the first such tile that cannot be prefetched.
void plan_prefetches(const Kernel& k, LoweringPlan& plan) {
  PersistentGrid& p = plan.persistent;
  PointerRoots roots(k);
  for (size_t i = 0; i < k.body.ops.size(); ++i) {
    const Op& load = *k.body.ops[i];
    if (load.kind != OpKind::LoadBlock || plan.where(load.result()) != Placement::Shared)
      continue;
    const int tile = plan.tile_of.at(load.result());
    const SharedTile& t = plan.tiles[tile];
    if (plan.is_pipelined(t) || t.to_registers)
      continue;
    auto refuse = [&](const std::string& why) {
      if (p.why_not_prefetch.empty())
        p.why_not_prefetch = fmt::format("the shared tile of %{} ({}) is copied where the program starts: {}",
                                         load.result(), load.loc.str(), why);
    };
    // Written early, its bytes must be its own: no other tile may live there after its last reader.
    const SharedTile* other = nullptr;
    for (const SharedTile& u : plan.tiles)
      if (&u != &t && u.overlaps(t))
        other = &u;
    if (other) {
      refuse(fmt::format("its bytes are shared with the tile of %{}", other->value));
      continue;
    }
    // Copied before this program's stores, its tensor must be one the kernel never writes.
    if (!roots.of(load.operands[0])) {
      refuse("its block pointer does not come from a pointer parameter");
      continue;
    }
    if (!roots.never_written(load.operands[0])) {
      refuse("the kernel may write the tensor it reads (a copy made early could miss a store)");
      continue;
    }
    const Op* last_reader = nullptr;
    for (size_t j = i + 1; j < k.body.ops.size(); ++j)
      if (reads_tile(plan, *k.body.ops[j], tile))
        last_reader = k.body.ops[j].get();
    if (!last_reader)
      continue; // nothing reads it: nothing waits for it either
    std::string why;
    std::vector<const Op*> slice =
        top_level_scalar_slice(k, plan, {load.operands[0]}, i, nullptr, "the next program's copy of the tile", why);
    if (!why.empty()) {
      refuse(why);
      continue;
    }
    p.prefetches.push_back({&load, last_reader, std::move(slice)});
  }
}

} // namespace

void plan_persistent_grid(const Kernel& k, const CodegenOptions& options, LoweringPlan& plan) {
  PersistentGrid& p = plan.persistent;
  p = PersistentGrid{};
  if (k.config.get_or("PERSISTENT", 0) == 0)
    return;
  p.asked = static_cast<int>(k.config.get_or("PERSISTENT", 0));
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
  plan_prefetches(k, plan);
}

} // namespace kiln
