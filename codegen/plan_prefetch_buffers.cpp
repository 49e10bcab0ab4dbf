#include "codegen/plan_prefetch_buffers.h"

#include "codegen/plan_producer_tiles.h"

#include <fmt/format.h>

#include <algorithm>

namespace kiln {

namespace {

constexpr int64_t round_up_1024(int64_t bytes) { return (bytes + 1023) / 1024 * 1024; }

// Why the prefetched tiles keep one buffer, or "" where they may have two.
std::string why_one_buffer(const Kernel& k, const LoweringPlan& plan, const CodegenOptions& options) {
  const PersistentGrid& p = plan.persistent;
  if (!options.prefetch_buffers)
    return "CodegenOptions::prefetch_buffers is off";
  if (p.dynamic())
    for (const PersistentPrefetch& f : p.prefetches) // the consumers learn the next id near the program's end
      if (std::string why = why_not_producer_tile(k, options, plan, *f.load); !why.empty())
        return fmt::format("the grid is dynamic and the producer does not copy the tile of %{} ({}): {}",
                           f.load->result(), f.load->loc.str(), why);
  if (!plan.ws.on())
    return "not warp-specialised: waiting for a program's own tile would wait for the next one's copy too, which "
           "shares the threads' cp.async groups";
  for (const PersistentPrefetch& f : p.prefetches)
    if (plan.unwaited_loads.count(f.load))
      return fmt::format("the tile of %{} ({}) is waited for with the first tiles of a loop, not where it is loaded",
                         f.load->result(), f.load->loc.str());
  return "";
}

} // namespace

void plan_prefetch_buffers(const Kernel& k, const Target& target, const CodegenOptions& options, LoweringPlan& plan) {
  PersistentGrid& p = plan.persistent;
  p.next_copies_after = nullptr;
  p.second_buffers_end = 0;
  p.why_not_second_buffers.clear();
  if (!p.on || p.prefetches.empty())
    return;
  if (std::string why = why_one_buffer(k, plan, options); !why.empty()) {
    p.why_not_second_buffers = why;
    return;
  }
  // After everything else in the dynamic region, 1024-byte aligned as every tile (the swizzle's period).
  int64_t offset = round_up_1024(std::max(plan.tiles_bytes + plan.scratch_bytes, plan.bulk.end()));
  std::vector<int64_t> offsets;
  for (const PersistentPrefetch& f : p.prefetches) {
    offsets.push_back(offset);
    offset += round_up_1024(plan.tiles[plan.tile_of.at(f.load->result())].bytes_per_stage());
  }
  const int64_t cta_bytes = offset + plan.static_shared_bytes();
  if (cta_bytes > target.max_shared_bytes_per_block() ||
      Target::ctas_by_shared_memory(cta_bytes, target.max_shared_bytes_per_sm()) < p.ctas_per_sm) {
    p.why_not_second_buffers =
        fmt::format("second buffers would take the CTA's shared memory to {} bytes; {} holds {} a block and {} an SM "
                    "({} CTA(s) an SM asked)",
                    cta_bytes, target.arch(), target.max_shared_bytes_per_block(), target.max_shared_bytes_per_sm(),
                    p.ctas_per_sm);
    return;
  }
  for (size_t i = 0; i < p.prefetches.size(); ++i)
    p.prefetches[i].second_offset = offsets[i];
  p.second_buffers_end = offset;
  for (const auto& op : k.body.ops)
    if (op->kind == OpKind::LoadBlock && plan.where(op->result()) == Placement::Shared) {
      const SharedTile& t = plan.tiles[plan.tile_of.at(op->result())];
      if (!plan.is_pipelined(t) && !t.to_registers)
        p.next_copies_after = op.get();
    }
}

} // namespace kiln
