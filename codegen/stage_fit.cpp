#include "codegen/stage_fit.h"

#include <fmt/format.h>

namespace kiln {

std::string why_stage_does_not_fit(const Kernel& k, const Target& target, const LoweringPlan& plan, int64_t offset,
                                   int64_t bytes, const char* stage, const char* beside) {
  const int64_t min_blocks = k.config.get_or("MIN_BLOCKS_PER_SM", 1);
  const int64_t block_bytes = offset + bytes + plan.static_shared_bytes();
  if (block_bytes > target.max_shared_bytes_per_block())
    return fmt::format("{} ({} B) does not fit beside {} ({} B) in {}'s {} B", stage, bytes, beside, offset,
                       target.arch(), target.max_shared_bytes_per_block());
  auto fit = [&](int64_t bytes_a_cta) {
    return Target::ctas_by_shared_memory(bytes_a_cta, target.max_shared_bytes_per_sm()) >= min_blocks;
  };
  if (fit(offset + plan.static_shared_bytes()) && !fit(block_bytes))
    return fmt::format("with {} ({} B) a CTA needs {} B of shared memory, and MIN_BLOCKS_PER_SM={} of them do not fit "
                       "in {}'s {} B an SM",
                       stage, bytes, block_bytes, min_blocks, target.arch(), target.max_shared_bytes_per_sm());
  return "";
}

} // namespace kiln
