#include "codegen/plan_programs_per_cta.h"

#include "codegen/plan_warp_specialization.h"

#include <fmt/format.h>

#include <algorithm>
#include <limits>

namespace kiln {

void plan_programs_per_cta(const Kernel& k, const Target& target, const CodegenOptions& options,
                           LoweringPlan& plan) {
  ProgramsPerCta& p = plan.programs;
  p = ProgramsPerCta{};
  const int64_t asked = k.config.get_or("PROGRAMS_PER_CTA", 1);
  if (asked == 1)
    return;
  WarpSpecialization& ws = plan.ws;
  const int64_t threads = asked * ws.consumer_threads + WarpSpecialization::kProducerThreads;
  if (asked < 1 || asked > ProgramsPerCta::kMost)
    p.why_not = fmt::format("PROGRAMS_PER_CTA={}: a CTA runs 1 to {} programs", asked, ProgramsPerCta::kMost);
  else if (!options.programs_per_cta)
    p.why_not = "CodegenOptions::programs_per_cta is off";
  else if (!ws.on())
    p.why_not = "the kernel is not warp-specialised (the programs share a producer warpgroup; " + ws.why_off() + ")";
  else if (!plan.persistent.on)
    p.why_not = "the grid is not persistent (each program's copy walks every other program id of its CTA; " +
                (plan.persistent.why_not.empty() ? std::string("PERSISTENT=0") : plan.persistent.why_not) + ")";
  else if (plan.pingpong.on())
    p.why_not = "PINGPONG=1 orders one program's own warpgroups; with two programs a CTA their main loops take turns "
                "by the producer's order";
  else if (threads > target.max_threads_per_block())
    p.why_not = fmt::format("{} programs of num_warps={} and a producer warpgroup are {} threads; a CTA holds at most {}",
                            asked, plan.num_warps, threads, target.max_threads_per_block());
  if (!p.why_not.empty())
    return;
  p.count = static_cast<int>(asked);
  // Each copy's own bytes: the tiles outside the ring and the scratch, [lo, hi) in the one-program layout; copy c's
  // are c · stride_bytes further on (ring tiles inside that span are left unused in the later copies).
  int64_t lo = std::numeric_limits<int64_t>::max(), hi = 0;
  auto own = [&](int64_t from, int64_t to) { lo = std::min(lo, from), hi = std::max(hi, to); };
  if (plan.scratch_bytes)
    own(plan.tiles_bytes, plan.tiles_bytes + plan.scratch_bytes);
  for (const SharedTile& t : plan.tiles)
    if (!plan.in_shared_ring(t))
      own(t.offset, t.offset + (t.bytes_per_stage() * t.stages + 1023) / 1024 * 1024); // as plan_shared_memory
  p.stride_bytes = hi > lo ? (hi - lo + 1023) / 1024 * 1024 : 0;
  p.shared_bytes = std::max(plan.tiles_bytes + plan.scratch_bytes, hi + (p.count - 1) * p.stride_bytes);
  plan_register_reallocation(p.count * ws.consumer_threads, static_cast<int>(k.config.get_or("MIN_BLOCKS_PER_SM", 1)),
                             ws);
}

} // namespace kiln
