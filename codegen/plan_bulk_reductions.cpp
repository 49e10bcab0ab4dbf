#include "codegen/plan_bulk_reductions.h"

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

} // namespace

void plan_bulk_reductions(const Kernel& k, const Target& target, const CodegenOptions& options, LoweringPlan& plan) {
  PointerRoots roots(k);
  BulkReductions& b = plan.bulk;
  b.stage_offset = (plan.tiles_bytes + plan.scratch_bytes + 127) / 128 * 128;
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
    const int64_t bytes = r.rows * r.cols * 4;
    if (std::string why = why_not_fit(bytes); !why.empty()) {
      b.why_not[&op] = why;
      return;
    }
    r.writes = plan_stage_writes(access_layout(k, plan, op), r.row_dim, r.col_dim, r.cols, options.rotated_stage_writes);
    b.stage_bytes = std::max(b.stage_bytes, bytes);
    b.ops[&op] = r;
  });
  b.stages = b.any() && why_not_fit(2 * b.stage_bytes).empty() ? 2 : 1;
}

} // namespace kiln
