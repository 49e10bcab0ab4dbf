#include "codegen/block_tensor_maps.h"

#include "codegen/block_base.h"

#include <fmt/format.h>

namespace kiln {

namespace {

std::string where(const Op& op) { return op.loc.str(); }

constexpr size_t kMostTensorMapDims = 5;

} // namespace

BlockPtrTracer::BlockPtrTracer(const Kernel& k) : k_(k) {
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

const Op* BlockPtrTracer::trace(ValueId v, std::string& why) {
  std::set<ValueId> seen;
  const Op* found = nullptr;
  if (!visit(v, seen, found, why))
    return nullptr;
  if (!found)
    why = "the block pointer has no make_block_ptr";
  return found;
}

// Adds the make_block_ptr behind `v` to `found`; false (with `why`) when it is not unique or not there.
bool BlockPtrTracer::visit(ValueId v, std::set<ValueId>& seen, const Op*& found, std::string& why) {
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
    why =
        fmt::format("the block pointer is one of two make_block_ptr ({} and {})", where(*found), where(*def));
    return false;
  }
  found = def;
  return true;
}

std::optional<TensorMapParam> tensor_map_for(const Kernel& k, const Op& make, const SharedTile& tile,
                                             std::string& why) {
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
    why = fmt::format(
        "make_block_ptr ({}) has {} dims and its base {} per-program terms; a tensor map has at most {} "
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
      why = fmt::format("the {} of dim {} of make_block_ptr ({}) is computed in the kernel",
                        shape ? "stride" : "shape", d, m.source);
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

} // namespace kiln
