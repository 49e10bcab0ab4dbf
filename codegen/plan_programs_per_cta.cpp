#include "codegen/plan_programs_per_cta.h"

#include "codegen/plan_warp_specialization.h"

#include <fmt/format.h>

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
  p.stride_bytes = (plan.tiles_bytes + plan.scratch_bytes + 1023) / 1024 * 1024;
  plan_register_reallocation(p.count * ws.consumer_threads, static_cast<int>(k.config.get_or("MIN_BLOCKS_PER_SM", 1)),
                             ws);
}

} // namespace kiln
