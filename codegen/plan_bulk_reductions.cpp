#include "codegen/plan_bulk_reductions.h"

#include "codegen/operand_layouts.h"
#include "codegen/pointer_roots.h"

#include <functional>
#include <optional>
#include <set>
#include <unordered_map>

namespace kiln {

namespace {

// Why `op` adds element by element rather than through the stage; empty when the stage serves it.
std::string why_not_bulk(const Kernel& k, const Target& target, const CodegenOptions& options, const Op& op,
                         PointerRoots& roots, const std::set<int>& loaded) {
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
  const std::optional<std::set<int>> mine = roots.of(op.operands[0]);
  if (!mine)
    return "its block pointer's base is not known to come from a pointer parameter";
  for (int p : *mine)
    if (loaded.count(p))
      return fmt::format("the kernel also reads through '{}', and a bulk reduction's sums land asynchronously",
                         k.params[static_cast<size_t>(p)].name);
  return "";
}

} // namespace

void plan_bulk_reductions(const Kernel& k, const Target& target, const CodegenOptions& options, LoweringPlan& plan) {
  PointerRoots roots(k);
  // Every parameter the kernel may read through (all of them when a read's pointer has unknown roots).
  std::set<int> loaded;
  if (std::optional<std::set<int>> r = roots.read())
    loaded = std::move(*r);
  else
    for (size_t i = 0; i < k.params.size(); ++i)
      loaded.insert(static_cast<int>(i));
  BulkReductions& b = plan.bulk;
  const int64_t min_blocks = k.config.get_or("MIN_BLOCKS_PER_SM", 1);
  b.stage_offset = (plan.tiles_bytes + plan.scratch_bytes + 127) / 128 * 128;
  // Why `bytes` of stages do not fit beside the tiles and the scratch; empty where they do. The CTAs the config asks
  // to share an SM (MIN_BLOCKS_PER_SM) must still fit there with the stages, where they fit without them.
  auto why_not_fit = [&](int64_t bytes) -> std::string {
    const int64_t block_bytes = b.stage_offset + bytes + plan.static_shared_bytes();
    if (block_bytes > target.max_shared_bytes_per_block())
      return fmt::format("its stage ({} B) does not fit beside the tiles and the scratch ({} B) in {}'s {} B", bytes,
                         b.stage_offset, target.arch(), target.max_shared_bytes_per_block());
    auto fit = [&](int64_t bytes_a_cta) {
      return Target::ctas_by_shared_memory(bytes_a_cta, target.max_shared_bytes_per_sm()) >= min_blocks;
    };
    if (fit(b.stage_offset + plan.static_shared_bytes()) && !fit(block_bytes))
      return fmt::format("with its stage ({} B) a CTA needs {} B of shared memory, and MIN_BLOCKS_PER_SM={} of them "
                         "do not fit in {}'s {} B an SM",
                         bytes, block_bytes, min_blocks, target.arch(), target.max_shared_bytes_per_sm());
    return "";
  };
  walk(k.body, [&](const Op& op) {
    if (op.kind != OpKind::AtomicAddBlock)
      return;
    if (std::string why = why_not_bulk(k, target, options, op, roots, loaded); !why.empty()) {
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
