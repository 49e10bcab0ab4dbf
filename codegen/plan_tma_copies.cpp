#include "codegen/plan_tma_copies.h"

#include "codegen/block_tensor_maps.h"

#include <fmt/format.h>

#include <cmath>
#include <optional>
#include <set>

namespace kiln {

namespace {

std::string where(const Op& op) { return op.loc.str(); }

} // namespace

std::string why_no_tma_copy_of_tile(const Kernel& k, const Op& load, const SharedTile& t) {
  const Type& bp = k.type(load.operands[0]);
  if (t.to_registers && bp.shape.size() != 1)
    return "the tile is read into registers (a streaming loop's staged load), which cp.async's ring serves";
  if (load.padding != Padding::Zero)
    return fmt::format("TMA fills past the tensor with zeros; this load pads with {}",
                       std::isnan(load.padding.value) ? "NaN" : fmt::format("{}", load.padding.value));
  if (t.to_registers) // a vector
    return why_no_tma_copy_of_vector(t);
  if (bp.shape.size() != 2)
    return fmt::format("the block is {}-D; TMA copies of 2-D blocks only so far", bp.shape.size());
  if (t.elem_bytes != 2 && t.elem_bytes != 4)
    return fmt::format("{}-byte elements (TMA copies here take 2 or 4)", t.elem_bytes);
  const SharedTileGeometry g = t.geometry();
  if (g.swizzle_mode() == SwizzleMode::None)
    return fmt::format("the tile's lines are {} bytes, not 32, 64 or 128", g.line_bytes());
  if (t.rows > 256)
    return fmt::format("{} rows per tile; a TMA box holds at most 256", t.rows);
  if (t.bytes_per_stage() % 1024 != 0 || t.offset % 1024 != 0)
    return "the tile's stages are not whole 1024-byte swizzle periods";
  return "";
}

std::string why_no_tma_copy_of_vector(const SharedTile& t) {
  if (t.elem_bytes != 2 && t.elem_bytes != 4)
    return fmt::format("{}-byte elements (TMA copies here take 2 or 4)", t.elem_bytes);
  if (t.cols > 256)
    return fmt::format("a vector of {} elements; a TMA box holds at most 256", t.cols);
  if (t.bytes_per_stage() % 128 != 0 || t.offset % 128 != 0)
    return fmt::format("the vector's slots are {} bytes, not whole 128-byte lines", t.bytes_per_stage());
  return "";
}

void plan_tma_copies(const Kernel& k, const Target& target, const CodegenOptions& options, LoweringPlan& plan) {
  TmaPlan& tma = plan.tma;
  tma = TmaPlan{};
  if (plan.pipelined.empty())
    return;
  if (target.sm < 90 || !target.arch_specific)
    return; // nothing to say on targets without TMA: their lowered plans stay as they were
  std::string off;
  if (!options.tma)
    off = "CodegenOptions::tma is off";
  else if (!options.swizzle)
    off = "shared tiles are not swizzled (CodegenOptions::swizzle is off)";
  BlockPtrTracer tracer(k);
  // One map per make_block_ptr and box, shared by every load that reads the same tensor in the same boxes.
  std::map<std::pair<const Op*, std::vector<int64_t>>, int> map_of;
  // Loops in program order, so that ring numbers (and the kernel's text) do not depend on where ops live in memory.
  std::vector<const Op*> loops;
  walk(k.body, [&](const Op& op) {
    if (plan.pipelined.count(&op))
      loops.push_back(&op);
  });
  for (const Op* loop : loops) {
    const std::vector<const Op*>& loads = plan.pipelined.at(loop);
    if (!off.empty()) {
      tma.why_not[loop] = off;
      continue;
    }
    std::string why;
    std::vector<std::pair<const Op*, TensorMapParam>> found;
    std::vector<TmaCopy> copies;
    for (const Op* load : loads) {
      const SharedTile& t = plan.tiles[plan.tile_of.at(load->result())];
      why = why_no_tma_copy_of_tile(k, *load, t);
      const Op* make = why.empty() ? tracer.trace(load->operands[0], why) : nullptr;
      std::optional<TensorMapParam> m = make ? tensor_map_for(k, *make, t, why) : std::nullopt;
      if (!m) {
        why = fmt::format("load at {}: {}", where(*load), why);
        break;
      }
      const SharedTileGeometry g = t.geometry();
      TmaCopy c;
      const bool vector = k.type(load->operands[0]).shape.size() == 1; // one copy, unswizzled
      c.panel_elems = vector ? t.cols : g.line_bytes() / g.elem_bytes;
      c.panels = static_cast<int>(t.cols / c.panel_elems);
      c.bytes_per_stage = t.bytes_per_stage();
      copies.push_back(c);
      found.emplace_back(make, std::move(*m));
    }
    if (copies.size() != loads.size()) {
      tma.why_not[loop] = why;
      continue;
    }
    for (size_t i = 0; i < loads.size(); ++i) {
      auto [it, added] = map_of.try_emplace({found[i].first, found[i].second.box}, static_cast<int>(tma.maps.size()));
      if (added)
        tma.maps.push_back(std::move(found[i].second));
      copies[i].map = it->second;
      tma.copies[loads[i]] = copies[i];
    }
    const int ring = static_cast<int>(tma.loops.size());
    tma.loops[loop] = ring;
    tma.barrier_bytes += 8 * plan.ring_tile(loop).stages;
  }
}

} // namespace kiln
