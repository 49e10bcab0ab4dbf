#include "codegen/plan_tma_copies.h"

#include "codegen/block_base.h"

#include <fmt/format.h>

#include <cmath>
#include <optional>
#include <set>

namespace kiln {

namespace {

std::string where(const Op& op) { return op.loc.str(); }

constexpr size_t kMostTensorMapDims = 5;

// Finds the make_block_ptr a block-pointer value comes from, through advances and the values a loop carries
// (its initial value and what its body yields must lead to the same one). Fills `why` when there is none.
class BlockPtrTracer {
public:
  explicit BlockPtrTracer(const Kernel& k) : k_(k) {
    walk(k.body, [&](const Op& op) {
      if (op.kind != OpKind::For)
        return;
      const Region& body = op.regions[0];
      for (size_t j = 1; j < body.args.size(); ++j)
        carried_[body.args[j]] = {&op, j - 1};
      for (size_t j = 0; j < op.results.size(); ++j)
        carried_[op.results[j]] = {&op, j};
    });
  }

  const Op* trace(ValueId v, std::string& why) {
    std::set<ValueId> seen;
    const Op* found = nullptr;
    if (!visit(v, seen, found, why))
      return nullptr;
    if (!found)
      why = "the block pointer has no make_block_ptr";
    return found;
  }

private:
  // Adds the make_block_ptr behind `v` to `found`; false (with `why`) when it is not unique or not there.
  bool visit(ValueId v, std::set<ValueId>& seen, const Op*& found, std::string& why) {
    if (!seen.insert(v).second)
      return true; // around a loop back to a value already followed
    if (auto it = carried_.find(v); it != carried_.end()) {
      const auto& [loop, j] = it->second;
      const Op& yield = *loop->regions[0].ops.back();
      return visit(loop->operands[3 + j], seen, found, why) && visit(yield.operands[j], seen, found, why);
    }
    const Op* def = k_.info(v).def;
    if (!def) {
      why = "the block pointer is not built in the kernel";
      return false;
    }
    if (def->kind == OpKind::Advance)
      return visit(def->operands[0], seen, found, why);
    if (def->kind != OpKind::MakeBlockPtr) {
      why = fmt::format("the block pointer comes from a {} ({})", op_name(def->kind), where(*def));
      return false;
    }
    if (found && found != def) {
      why = fmt::format("the block pointer is one of two make_block_ptr ({} and {})", where(*found), where(*def));
      return false;
    }
    found = def;
    return true;
  }

  const Kernel& k_;
  std::unordered_map<ValueId, std::pair<const Op*, size_t>> carried_;
};

// The tensor map of `make` read in boxes of `tile`, or why there is none.
std::optional<TensorMapParam> map_for(const Kernel& k, const Op& make, const SharedTile& tile, std::string& why) {
  const Type& bp = k.type(make.result());
  const size_t rank = bp.shape.size();
  TensorMapParam m;
  m.source = where(make);
  m.dtype = bp.elem;
  m.order.assign(bp.order.begin(), bp.order.end());
  std::optional<BlockBase> base = decompose_block_base(k, make.operands[0], why);
  if (!base) {
    why = fmt::format("make_block_ptr ({}): {}", m.source, why);
    return std::nullopt;
  }
  if (rank + base->terms.size() > kMostTensorMapDims) {
    why = fmt::format("make_block_ptr ({}) has {} dims and its base {} per-program terms; a tensor map has at most {} "
                      "dims",
                      m.source, rank, base->terms.size(), kMostTensorMapDims);
    return std::nullopt;
  }
  m.base_param = base->param;
  m.outer = std::move(base->terms);
  for (size_t d = 0; d < rank; ++d) {
    auto shape = launch_scalar(k, make.operands[1 + d]);
    auto stride = launch_scalar(k, make.operands[1 + rank + d]);
    if (!shape || !stride) {
      why = fmt::format("the {} of dim {} of make_block_ptr ({}) is computed in the kernel", shape ? "stride" : "shape",
                        d, m.source);
      return std::nullopt;
    }
    m.shape.push_back(*shape);
    m.strides.push_back(*stride);
  }
  m.box.assign(bp.shape.begin(), bp.shape.end());
  if (rank == 1) { // a staged vector: one row, copied whole and unswizzled (its chunks lie in order)
    m.swizzle = SwizzleMode::None;
    return m;
  }
  const SharedTileGeometry g = tile.geometry();
  m.swizzle = g.swizzle_mode();
  m.box[static_cast<size_t>(m.order[0])] = g.line_bytes() / g.elem_bytes;
  return m;
}

// Why the pipelined load `load` cannot be a TMA copy ("" when it can).
std::string tile_problem(const Kernel& k, const Op& load, const SharedTile& t) {
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

} // namespace

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
      why = tile_problem(k, *load, t);
      const Op* make = why.empty() ? tracer.trace(load->operands[0], why) : nullptr;
      std::optional<TensorMapParam> m = make ? map_for(k, *make, t, why) : std::nullopt;
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
