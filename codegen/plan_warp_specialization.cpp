#include "codegen/plan_warp_specialization.h"

#include "codegen/program_scalars.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

namespace kiln {

namespace {

constexpr int kRegistersPerSm = 64 * 1024; // every supported arch (sm_80 ... sm_90a)
// The producer issues TMA copies alone (a launch whose maps are illegal runs the unspecialised rendering:
// GeneratedKernel::illegal_maps_fallback), stepping only its block pointers' offsets: FlashAttention-3's 24 for
// two consumer warpgroups, which gives them 240. With a cp.async path of its own the producer needed 56, and the
// consumers kept 224 (the backward's 128-key dK/dV tile spilled 108 bytes there, 8 at 240; worklog §81). A
// producer that draws a dynamic persistent grid's programs (its first warp reads each id, kiln::warp_uniform)
// spilled 8 bytes at 24 in FA2's 128 x 128 tile at D = 128, nothing at 32.
constexpr int kProducerRegisters = 24;
constexpr int kDrawingProducerRegisters = 32;
constexpr int kMostConsumerRegisters = 240;

int floor8(int n) { return n / 8 * 8; }

// Whether `v` is the block pointer a specialised loop carries for one of its pipelined loads, as that loop's
// result: the producer holds it in its own variable after walking the loop (a later loop may start from it).
bool carried_by_producer(const Kernel& k, const LoweringPlan& plan, const std::vector<const Op*>& loops,
                         ValueId v) {
  const Op* def = k.info(v).def;
  if (!def || def->kind != OpKind::For || std::find(loops.begin(), loops.end(), def) == loops.end())
    return false;
  const size_t result =
      static_cast<size_t>(std::find(def->results.begin(), def->results.end(), v) - def->results.begin());
  for (const Op* l : plan.pipelined.at(def))
    if (plan.pipelined_steps.at(l).carried == result)
      return true;
  return false;
}

// The scalars the producer recomputes: the ops behind `needed`, all at the top of the kernel before the last
// specialised loop, in program order (top_level_scalar_slice); the block pointers an earlier specialised loop
// carries are the producer's own. Empty with `why` set when one is not such an op.
std::vector<const Op*> producer_slice(const Kernel& k, const LoweringPlan& plan,
                                      const std::vector<const Op*>& loops, std::vector<ValueId> needed,
                                      std::string& why) {
  return top_level_scalar_slice(
      k, plan, std::move(needed), top_level_positions(k).at(loops.back()),
      [&](ValueId v) { return carried_by_producer(k, plan, loops, v); }, "the loops' copies (the producer's)", why);
}

// Why the loops' rings cannot be one ring ("" when they can): the same number of tiles a stage, the same
// stages, and the i-th tile of each loop in the same bytes (the plan gives loops that run one after the other
// the same offsets when their tiles match).
std::string one_ring(const LoweringPlan& plan, const std::vector<const Op*>& loops) {
  const std::vector<const Op*>& first = plan.pipelined.at(loops.front());
  for (size_t i = 1; i < loops.size(); ++i) {
    const std::vector<const Op*>& loads = plan.pipelined.at(loops[i]);
    bool same = loads.size() == first.size();
    for (size_t j = 0; same && j < loads.size(); ++j) {
      const SharedTile& a = plan.tiles[plan.tile_of.at(first[j]->result())];
      const SharedTile& b = plan.tiles[plan.tile_of.at(loads[j]->result())];
      same = a.offset == b.offset && a.stages == b.stages && a.bytes_per_stage() == b.bytes_per_stage();
    }
    if (!same)
      return fmt::format("the rings of the loops at {} and {} differ in tiles, stages or bytes (one producer "
                         "fills one ring)",
                         loops.front()->loc.str(), loops[i]->loc.str());
  }
  return "";
}

// Why `loops` cannot be split into producer and consumers ("" when they can); fills the producer's ops.
std::string check(const Kernel& k, const LoweringPlan& plan, const std::vector<const Op*>& loops,
                  std::vector<const Op*>& producer_ops) {
  const std::map<const Op*, size_t> top_level = top_level_positions(k);
  for (const Op* loop : loops)
    if (!top_level.count(loop))
      return fmt::format("the pipelined loop at {} is inside another loop or an if", loop->loc.str());
  if (std::string why = one_ring(plan, loops); !why.empty())
    return why;
  // The producer fills the ring while the consumers run the code before and between the loops: no other tile
  // may share the ring's bytes.
  std::set<const Op*> ring_loads;
  for (const Op* loop : loops)
    ring_loads.insert(plan.pipelined.at(loop).begin(), plan.pipelined.at(loop).end());
  for (const SharedTile& t : plan.tiles) {
    if (ring_loads.count(t.load))
      continue;
    for (const Op* l : ring_loads) {
      const SharedTile& r = plan.tiles[plan.tile_of.at(l->result())];
      if (t.overlaps(r))
        return fmt::format("the shared tile of %{} shares bytes with the ring of the loop at {}", t.value,
                           l->loc.str());
    }
  }
  // Bounds, the carried block pointers' initial values and their steps.
  std::vector<ValueId> needed;
  for (const Op* loop : loops) {
    needed.insert(needed.end(), {loop->operands[0], loop->operands[1], loop->operands[2]});
    for (const Op* l : plan.pipelined.at(loop)) {
      const PipelinedStep& step = plan.pipelined_steps.at(l);
      needed.push_back(loop->operands[3 + step.carried]);
      needed.insert(needed.end(), step.advance->operands.begin() + 1, step.advance->operands.end());
    }
  }
  std::string why;
  producer_ops = producer_slice(k, plan, loops, needed, why);
  return why;
}

} // namespace

void plan_register_reallocation(int consumer_threads, int blocks, bool producer_draws_programs,
                                WarpSpecialization& ws) {
  const int producer = producer_draws_programs ? kDrawingProducerRegisters : kProducerRegisters;
  ws.entry_registers = ws.producer_registers = ws.consumer_registers = 0;
  const int threads = consumer_threads + WarpSpecialization::kProducerThreads;
  const int per_thread = kRegistersPerSm / (threads * std::max(blocks, 1));
  if (per_thread >= 256)
    return; // every thread may already hold 255
  const int entry = floor8(per_thread);
  if (entry <= producer)
    return;
  const int released = (entry - producer) * WarpSpecialization::kProducerThreads;
  const int consumer = std::min(kMostConsumerRegisters, floor8(entry + released / consumer_threads));
  if (consumer <= entry)
    return;
  ws.entry_registers = entry;
  ws.producer_registers = producer;
  ws.consumer_registers = consumer;
}

void plan_warp_specialization(const Kernel& k, const Target& target, const CodegenOptions& options,
                              LoweringPlan& plan) {
  WarpSpecialization& ws = plan.ws;
  ws = WarpSpecialization{};
  ws.consumer_threads = 32 * plan.num_warps;
  if (k.config.get_or("WARP_SPECIALIZE", 0) == 0)
    return;
  if (target.sm < 90 || !target.arch_specific)
    ws.why_not = fmt::format("{} has no TMA or setmaxnreg (sm_90a has)", target.arch());
  else if (!options.warp_specialize)
    ws.why_not = "CodegenOptions::warp_specialize is off";
  else if (plan.pipelined.empty())
    ws.why_not = "the kernel has no pipelined loop";
  else if (plan.num_warps % 4 != 0)
    ws.why_not = fmt::format("num_warps={} is not whole warpgroups", plan.num_warps);
  if (!ws.why_not.empty())
    return;
  // The pipelined loops in program order; every one must be copied by TMA.
  std::vector<const Op*> loops;
  walk(k.body, [&](const Op& op) {
    if (plan.pipelined.count(&op))
      loops.push_back(&op);
  });
  for (const Op* loop : loops)
    if (!plan.tma.loops.count(loop)) {
      auto why = plan.tma.why_not.find(loop);
      ws.why_not = fmt::format("the tiles of the loop at {} are not copied by TMA{}", loop->loc.str(),
                               why != plan.tma.why_not.end() ? " (" + why->second + ")" : std::string());
      return;
    }
  std::vector<const Op*> producer_ops;
  ws.why_not = check(k, plan, loops, producer_ops);
  if (!ws.why_not.empty())
    return;
  ws.loops = loops;
  ws.producer_ops = std::move(producer_ops);
  // plan_persistent_grid comes later: the config's ask decides (a refused dynamic grid leaves the producer 8
  // registers it does not need).
  plan_register_reallocation(ws.consumer_threads, static_cast<int>(k.config.get_or("MIN_BLOCKS_PER_SM", 1)),
                             options.persistent && k.config.get_or("PERSISTENT", 0) == 2, ws);
  // One ring for every loop: the first loop's barriers (every TMA loop is specialised, so ring 0).
  const int stages = plan.ring_tile(loops.front()).stages;
  for (const Op* loop : loops)
    plan.tma.loops[loop] = 0;
  // The full barriers of that ring, and one more mbarrier per slot: the consumers' release of it.
  plan.tma.barrier_bytes = 2 * 8 * stages;
  // The consumers wait for a tile loaded before a loop where they issue it: the loop's waits are on the
  // producer's barriers, which do not cover the consumers' own cp.async copies.
  plan.unwaited_loads.clear();
}

} // namespace kiln
