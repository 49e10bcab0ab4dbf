#include "codegen/plan_producer_tiles.h"

#include "codegen/block_tensor_maps.h"
#include "codegen/plan_tma_copies.h"
#include "codegen/pointer_roots.h"
#include "codegen/program_scalars.h"

#include <fmt/format.h>

#include <algorithm>
#include <optional>

namespace kiln {

namespace {

// What the producer needs to copy a tile: the map and the scalars behind the block pointer.
struct ProducerCopy {
  std::optional<TensorMapParam> map;
  std::vector<const Op*> slice;
};

std::string why_not_copy(const Kernel& k, const CodegenOptions& options, const LoweringPlan& plan,
                         const Op& load, ProducerCopy& copy) {
  if (!options.producer_tiles)
    return "CodegenOptions::producer_tiles is off";
  if (!plan.ws.on())
    return "the kernel is not warp-specialised";
  const std::map<const Op*, size_t> top_level = top_level_positions(k);
  auto at = top_level.find(&load);
  if (at == top_level.end())
    return "the load is inside a loop or an if";
  if (at->second > top_level.at(plan.ws.loops.front()))
    return fmt::format("the load comes after the specialised loop at {}", plan.ws.loops.front()->loc.str());
  const SharedTile& t = plan.tiles[plan.tile_of.at(load.result())];
  if (std::string why = why_no_tma_copy_of_tile(k, load, t); !why.empty())
    return why;
  for (const SharedTile& u : plan.tiles)
    if (&u != &t && u.overlaps(t))
      return fmt::format("its bytes are shared with the tile of %{} (the producer copies it early)", u.value);
  PointerRoots roots(k);
  if (!roots.of(load.operands[0]) || !roots.never_written(load.operands[0]))
    return "the kernel may write the tensor it reads (a copy made early could miss a store)";
  std::string why;
  BlockPtrTracer tracer(k);
  const Op* make = tracer.trace(load.operands[0], why);
  if (make)
    copy.map = tensor_map_for(k, *make, t, why);
  if (!copy.map)
    return why;
  copy.slice = top_level_scalar_slice(k, plan, {load.operands[0]}, at->second, nullptr,
                                      "the producer's copy of the tile", why);
  return why;
}

// The top-level ops of `a` and `b`, once each, in program order.
std::vector<const Op*> merged(const Kernel& k, const std::vector<const Op*>& a,
                              const std::vector<const Op*>& b) {
  const std::map<const Op*, size_t> at = top_level_positions(k);
  std::vector<const Op*> all = a;
  for (const Op* op : b)
    if (std::find(all.begin(), all.end(), op) == all.end())
      all.push_back(op);
  std::sort(all.begin(), all.end(), [&](const Op* x, const Op* y) { return at.at(x) < at.at(y); });
  return all;
}

} // namespace

std::string why_not_producer_tile(const Kernel& k, const CodegenOptions& options, const LoweringPlan& plan,
                                  const Op& load) {
  ProducerCopy copy;
  return why_not_copy(k, options, plan, load, copy);
}

void plan_producer_tiles(const Kernel& k, const CodegenOptions& options, LoweringPlan& plan) {
  ProducerTiles& p = plan.producer_tiles;
  p = ProducerTiles{};
  if (!plan.ws.on())
    return; // nothing to say: the consumers are the program
  p.buffers = plan.persistent.on ? 2 : 1;
  for (const auto& op : k.body.ops) {
    const Op& load = *op;
    if (load.kind != OpKind::LoadBlock || plan.where(load.result()) != Placement::Shared)
      continue;
    const SharedTile& t = plan.tiles[plan.tile_of.at(load.result())];
    if (plan.is_pipelined(t) || t.to_registers)
      continue;
    auto refuse = [&](const std::string& why) {
      if (p.why_not.empty())
        p.why_not = fmt::format("the shared tile of %{} ({}) is copied by the consumers: {}", load.result(),
                                load.loc.str(), why);
    };
    ProducerCopy copy;
    if (std::string why = why_not_copy(k, options, plan, load, copy); !why.empty()) {
      refuse(why);
      continue;
    }
    if (plan.persistent.on) {
      const PersistentPrefetch* f = plan.persistent.prefetch_of(&load);
      if (!f || !f->double_buffered()) {
        refuse(f ? "it has one buffer on the persistent grid (" + plan.persistent.why_not_second_buffers + ")"
                 : std::string("the persistent grid does not prefetch it"));
        continue;
      }
    }
    const SharedTileGeometry g = t.geometry();
    ProducerTile tile;
    tile.load = &load;
    tile.copy.map = static_cast<int>(plan.tma.maps.size());
    tile.copy.panel_elems = g.line_bytes() / g.elem_bytes;
    tile.copy.panels = static_cast<int>(t.cols / tile.copy.panel_elems);
    tile.copy.bytes_per_stage = t.bytes_per_stage();
    plan.tma.maps.push_back(std::move(*copy.map));
    plan.ws.producer_ops = merged(k, plan.ws.producer_ops, copy.slice);
    p.tiles.push_back(tile);
  }
  // A full and an empty mbarrier a buffer of each tile (the empty ones unused with one buffer).
  plan.tma.barrier_bytes += 2 * 8 * p.buffers * static_cast<int64_t>(p.tiles.size());
}

} // namespace kiln
