#include "codegen/plan_tma_stores.h"

#include "codegen/block_tensor_maps.h"
#include "codegen/operand_layouts.h"
#include "codegen/pointer_roots.h"
#include "codegen/stage_fit.h"

#include <fmt/format.h>

#include <set>

namespace kiln {

namespace {

constexpr int64_t round_up_1024(int64_t bytes) { return (bytes + 1023) / 1024 * 1024; }

// Why none of the kernel's stores can go out by TMA ("" when some may).
std::string why_not_any(const CodegenOptions& options, const LoweringPlan& plan) {
  if (!options.tma)
    return "the TMA unit is off (CodegenOptions::tma)";
  if (!options.tma_stores)
    return "TMA stores are off (CodegenOptions::tma_stores)";
  if (!options.swizzle)
    return "shared tiles are not swizzled (CodegenOptions::swizzle is off), and a TMA store reads a swizzled "
           "stage";
  if (!plan.ws.on())
    return "the kernel is not warp-specialised (its launches with illegal tensor maps would need a register "
           "path "
           "of their own)";
  return "";
}

// Why `op` (a block store at the top of the program) cannot go out by TMA ("" when it can); fills `tile`,
// `writes` and `map` where it can.
std::string why_not_store(const Kernel& k, const LoweringPlan& plan, const Op& op, BlockPtrTracer& tracer,
                          PointerRoots& roots, SharedTile& tile, StmatrixStore& writes,
                          std::optional<TensorMapParam>& map) {
  const Type& bt = k.type(op.operands[0]);
  if (bt.rank() != 2)
    return fmt::format("a rank-{} block (the stage holds 2-D tiles)", bt.rank());
  if (dtype_bytes(bt.elem) != 2)
    return fmt::format("{} elements (stmatrix writes 16-bit ones)", dtype_name(bt.elem));
  if (bt.order[0] != 1)
    return "a column-major block (the stage's rows run along dim 0)";
  if (plan.where(op.operands[1]) != Placement::Registers)
    return "the stored value is not held in registers";
  const std::optional<StmatrixStore> st = stmatrix_store(access_layout(k, plan, op), 2);
  if (!st)
    return fmt::format("its registers ({}) are not whole 8x8 fragments for stmatrix",
                       access_layout(k, plan, op).str());
  tile.rows = bt.shape[0];
  tile.cols = bt.shape[1];
  tile.elem_bytes = 2;
  tile.contig_dim = 1;
  const SharedTileGeometry g = tile.geometry();
  if (g.swizzle_mode() == SwizzleMode::None)
    return fmt::format("its rows are {} bytes, not a swizzled line of 32, 64 or 128", g.row_bytes());
  if (tile.rows > 256)
    return fmt::format("{} rows; a TMA box holds at most 256", tile.rows);
  std::string why = roots.why_read_back(op.operands[0], "a TMA store lands");
  if (!why.empty())
    return why;
  const Op* make = tracer.trace(op.operands[0], why);
  if (make)
    map = tensor_map_for(k, *make, tile, why);
  if (!map)
    return why;
  writes = *st;
  return "";
}

} // namespace

void plan_tma_stores(const Kernel& k, const Target& target, const CodegenOptions& options,
                     LoweringPlan& plan) {
  TmaStores& s = plan.tma_stores;
  s = TmaStores{};
  if (target.sm < 90 || !target.arch_specific)
    return; // nothing to say on targets without TMA
  std::vector<const Op*> stores;
  std::set<const Op*> top;
  for (const auto& op : k.body.ops)
    top.insert(op.get());
  walk(k.body, [&](const Op& op) {
    if (op.kind == OpKind::StoreBlock)
      stores.push_back(&op);
  });
  if (stores.empty())
    return;
  if (std::string off = why_not_any(options, plan); !off.empty()) {
    for (const Op* op : stores)
      s.why_not[op] = off;
    return;
  }
  PointerRoots roots(k);
  BlockPtrTracer tracer(k);
  std::vector<std::pair<const Op*, TensorMapParam>> maps;
  for (const Op* op : stores) {
    if (!top.count(op)) {
      s.why_not[op] = "inside a loop or a branch (the stage's barriers need every consumer thread)";
      continue;
    }
    SharedTile tile;
    StmatrixStore writes;
    std::optional<TensorMapParam> map;
    if (std::string why = why_not_store(k, plan, *op, tracer, roots, tile, writes, map);
        !why.empty()) {
      s.why_not[op] = why;
      continue;
    }
    const SharedTileGeometry g = tile.geometry();
    TmaStore t;
    t.rows = tile.rows;
    t.cols = tile.cols;
    t.panel_elems = g.line_bytes() / g.elem_bytes;
    t.panels = static_cast<int>(tile.cols / t.panel_elems);
    t.writes = writes;
    s.ops[op] = t;
    s.stage_bytes = std::max(s.stage_bytes, tile.bytes_per_stage());
    maps.emplace_back(op, std::move(*map));
  }
  if (!s.any())
    return;
  // After everything else, on a 1024-byte boundary (a 128-byte swizzle's period).
  s.stage_offset = round_up_1024(
      std::max({plan.tiles_bytes + plan.scratch_bytes, plan.bulk.end(), plan.persistent.second_buffers_end}));
  if (const std::string why_not_fit = why_stage_does_not_fit(k, target, plan, s.stage_offset, s.stage_bytes,
                                                              "the store stage", "the CTA's other shared memory");
      !why_not_fit.empty()) {
    for (const auto& [op, t] : s.ops)
      s.why_not[op] = why_not_fit;
    s.ops.clear();
    s.stage_offset = s.stage_bytes = 0;
    return;
  }
  // The stage is one: each store but a non-persistent program's first waits for the one before to have read
  // it.
  bool first = true;
  for (const Op* op : stores) {
    auto it = s.ops.find(op);
    if (it == s.ops.end())
      continue;
    it->second.waits_for_stage = plan.persistent.on || !first;
    first = false;
  }
  for (auto& [op, map] : maps) {
    s.ops.at(op).map = static_cast<int>(plan.tma.maps.size());
    plan.tma.maps.push_back(std::move(map));
  }
  // The register path's widening of these stores' runs (lane exchanges) is not made: the stage takes the
  // value as it is held.
  std::erase_if(plan.conversions, [&](const LayoutConversion& c) {
    return s.ops.count(c.user) && c.method == ConversionMethod::RegisterShuffles;
  });
}

} // namespace kiln
