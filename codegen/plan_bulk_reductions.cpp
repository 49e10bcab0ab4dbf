#include "codegen/plan_bulk_reductions.h"

#include "codegen/block_tensor_maps.h"
#include "codegen/operand_layouts.h"
#include "codegen/pointer_roots.h"
#include "codegen/stage_fit.h"

#include <functional>
#include <optional>
#include <set>
#include <unordered_map>

namespace kiln {

namespace {

// Why `op` adds element by element rather than through the stage; empty when the stage serves it.
std::string why_not_bulk(const Kernel& k, const Target& target, const CodegenOptions& options, const Op& op,
                         PointerRoots& roots) {
  const Type& bt = k.type(op.operands[0]);
  if (target.sm < 90)
    return fmt::format("bulk reductions need sm_90, the target is {}", target.arch());
  if (!options.tma)
    return "the TMA unit is off (CodegenOptions::tma)";
  if (bt.elem != DType::f32)
    return fmt::format("bulk reductions add f32 here, the block is {}", dtype_name(bt.elem));
  if (bt.rank() > 2)
    return fmt::format("a rank-{} block (the stage holds rank 1 or 2)", bt.rank());
  if (bt.shape[static_cast<size_t>(bt.order[0])] * 4 < 16)
    return fmt::format("its rows are {} bytes, a bulk reduction moves 16 or more",
                       bt.shape[static_cast<size_t>(bt.order[0])] * 4);
  return roots.why_read_back(op.operands[0], "a bulk reduction's sums land");
}

// Why no block of the kernel can be added by TMA tensor reductions ("" when some may).
std::string why_not_any_tma(const Target& target, const CodegenOptions& options, const LoweringPlan& plan) {
  if (!target.arch_specific)
    return fmt::format("TMA reductions are generated for sm_90a, the target is {}", target.arch());
  if (!options.tma_reductions)
    return "TMA reductions are off (CodegenOptions::tma_reductions)";
  if (!options.swizzle)
    return "shared tiles are not swizzled (CodegenOptions::swizzle is off), and a TMA reduction reads a swizzled "
           "stage";
  if (!plan.ws.on())
    return "the kernel is not warp-specialised (its launches with illegal tensor maps would need a path of their "
           "own)";
  return "";
}

// Why `op`'s block (planned as `r`) cannot be added by TMA ("" when it can); fills `map` where it can.
std::string why_not_tma(const Kernel& k, const Op& op, const BulkReduction& r, BlockPtrTracer& tracer,
                        std::optional<TensorMapParam>& map) {
  if (r.row_dim < 0)
    return "a rank-1 block (the stage holds 2-D tiles)";
  if (r.col_dim != 1)
    return "a column-major block (the stage's rows run along dim 0)";
  if (r.rows > 256)
    return fmt::format("{} rows; a TMA box holds at most 256", r.rows);
  SharedTile tile;
  tile.rows = r.rows;
  tile.cols = r.cols;
  tile.elem_bytes = 4;
  tile.contig_dim = 1;
  const SharedTileGeometry g = tile.geometry();
  if (g.swizzle_mode() == SwizzleMode::None)
    return fmt::format("its rows are {} bytes, not a swizzled line of 32, 64 or 128", g.row_bytes());
  std::string why;
  const Op* make = tracer.trace(op.operands[0], why);
  if (make)
    map = tensor_map_for(k, *make, tile, why);
  return map ? "" : why;
}

} // namespace

void plan_bulk_reductions(const Kernel& k, const Target& target, const CodegenOptions& options, LoweringPlan& plan) {
  PointerRoots roots(k);
  BlockPtrTracer tracer(k);
  BulkReductions& b = plan.bulk;
  // A TMA reduction's stage is swizzled in 128-byte lines: on a 1024-byte boundary (the swizzle's period).
  const std::string why_no_tma = why_not_any_tma(target, options, plan);
  const int64_t align = why_no_tma.empty() ? 1024 : 128;
  b.stage_offset = (plan.tiles_bytes + plan.scratch_bytes + align - 1) / align * align;
  // Why `bytes` of stages do not fit beside the tiles and the scratch; empty where they do.
  auto why_not_fit = [&](int64_t bytes) {
    return why_stage_does_not_fit(k, target, plan, b.stage_offset, bytes, "its stage", "the tiles and the scratch");
  };
  walk(k.body, [&](const Op& op) {
    if (op.kind != OpKind::AtomicAddBlock)
      return;
    if (std::string why = why_not_bulk(k, target, options, op, roots); !why.empty()) {
      b.why_not[&op] = why;
      return;
    }
    const Type& bt = k.type(op.operands[0]);
    BulkReduction r;
    r.col_dim = bt.order[0];
    r.row_dim = bt.rank() == 2 ? bt.order[1] : -1;
    r.cols = bt.shape[static_cast<size_t>(r.col_dim)];
    r.rows = r.row_dim >= 0 ? bt.shape[static_cast<size_t>(r.row_dim)] : 1;
    // The stage's rows back to back, as they lie in a tensor whose rows are contiguous, so that one bulk reduction
    // adds the whole block there. Each row stays 16-byte aligned for a reduction of its own: a tile's dims are
    // powers of two, and rows of 16 bytes or more are whole multiples of 4 f32.
    const int64_t bytes = (r.rows * r.cols * 4 + align - 1) / align * align; // the next stage stays aligned
    if (std::string why = why_not_fit(bytes); !why.empty()) {
      b.why_not[&op] = why;
      return;
    }
    std::optional<TensorMapParam> map;
    r.why_not_tma = why_no_tma.empty() ? why_not_tma(k, op, r, tracer, map) : why_no_tma;
    const Layout L = access_layout(k, plan, op);
    if (map) {
      const SharedTileGeometry g = r.stage_format();
      r.map = static_cast<int>(plan.tma.maps.size());
      plan.tma.maps.push_back(std::move(*map));
      r.writes = plan_stage_writes(L, r.row_dim, r.col_dim, r.cols, options.rotated_stage_writes, &g);
    } else {
      r.writes = plan_stage_writes(L, r.row_dim, r.col_dim, r.cols, options.rotated_stage_writes);
    }
    b.stage_bytes = std::max(b.stage_bytes, bytes);
    b.ops[&op] = r;
  });
  b.stages = b.any() && why_not_fit(2 * b.stage_bytes).empty() ? 2 : 1;
}

} // namespace kiln
