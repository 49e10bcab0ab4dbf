#include "codegen/plan_pingpong.h"

#include <fmt/format.h>

namespace kiln {

void plan_pingpong(const Kernel& k, const CodegenOptions& options, LoweringPlan& plan) {
  PingPong& pp = plan.pingpong;
  pp = PingPong{};
  if (k.config.get_or("PINGPONG", 0) == 0)
    return;
  const WarpSpecialization& ws = plan.ws;
  const int warpgroups = ws.consumer_threads / 128;
  if (!options.pingpong)
    pp.why_not = "CodegenOptions::pingpong is off";
  else if (!ws.on())
    pp.why_not = "the kernel is not warp-specialised (the consumer warpgroups take turns only beside a producer; " +
                 ws.why_off() + ")";
  else if (warpgroups < 2)
    pp.why_not = fmt::format("num_warps={} is one consumer warpgroup: no other to take turns with", plan.num_warps);
  if (!pp.why_not.empty())
    return;
  for (const Op* loop : ws.loops)
    walk(loop->regions[0], [&](const Op& op) {
      if (plan.on_wgmma(op))
        pp.dots.insert(&op);
    });
  if (pp.dots.empty()) {
    pp.why_not = "the specialised loops hold no product on wgmma";
    return;
  }
  pp.warpgroups = warpgroups;
}

} // namespace kiln
