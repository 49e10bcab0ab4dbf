#include "codegen/plan_tile_barriers.h"

#include <algorithm>

namespace kiln {

namespace {

// Why the ring cannot take a barrier pair per tile ("" when it can).
std::string why_not(const LoweringPlan& plan) {
  const WarpSpecialization& ws = plan.ws;
  if (!ws.on())
    return fmt::format("the kernel is not warp-specialised ({})", ws.why_off());
  if (plan.ahead.on())
    return "PRODUCT_AHEAD=1 waits for a whole slot an iteration ahead";
  const size_t tiles = plan.ring_tiles_per_slot();
  for (const Op* loop : ws.loops) {
    const std::vector<const Op*>& loads = plan.pipelined.at(loop);
    if (loads.size() != tiles)
      return fmt::format("the loops sharing the ring copy {} and {} tiles a slot (at {} and {})", tiles, loads.size(),
                         ws.loops.front()->loc.str(), loop->loc.str());
    for (const Op* load : loads)
      if (plan.where(load->result()) != Placement::Shared)
        return fmt::format("the load at {} is read from its slot into registers, where the slot's one wait serves it",
                           load->loc.str());
  }
  const int stages = plan.ring_tile(ws.loops.front()).stages;
  if (static_cast<int64_t>(stages) * static_cast<int64_t>(tiles) > 32)
    return fmt::format("{} stages of {} tiles need more than 32 parity bits", stages, tiles);
  return "";
}

// Whether every op of `body` (at any depth) that reads `v` is one of `readers`.
bool read_only_by(const Region& body, ValueId v, const std::vector<const Op*>& readers) {
  bool only = true;
  walk(body, [&](const Op& op) {
    for (ValueId o : op.operands)
      if (o == v && std::find(readers.begin(), readers.end(), &op) == readers.end())
        only = false;
  });
  return only;
}

} // namespace

void plan_tile_barriers(const Kernel& k, const CodegenOptions& options, LoweringPlan& plan) {
  WarpSpecialization& ws = plan.ws;
  ws.tile_barriers = false;
  ws.why_not_tile_barriers.clear();
  for (auto& [loop, late] : plan.late.loops)
    late.released_after_first.clear();
  if (k.config.get_or("TILE_BARRIERS", 0) == 0)
    return;
  if (!options.tile_barriers) {
    ws.why_not_tile_barriers = "CodegenOptions::tile_barriers is off";
    return;
  }
  if (std::string why = why_not(plan); !why.empty()) {
    ws.why_not_tile_barriers = why;
    return;
  }
  ws.tile_barriers = true;
  const int stages = plan.ring_tile(ws.loops.front()).stages;
  const int64_t tiles = static_cast<int64_t>(plan.ring_tiles_per_slot());
  plan.tma.barrier_bytes = 2 * 8 * stages * tiles; // a full and an empty mbarrier per tile of each slot
  for (auto& [loop, late] : plan.late.loops)
    for (const Op* load : plan.pipelined.at(loop))
      if (read_only_by(loop->regions[0], load->result(), late.first))
        late.released_after_first.push_back(load);
}

} // namespace kiln
