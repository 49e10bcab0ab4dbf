#include "codegen/plan_warp_specialization.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

namespace kiln {

namespace {

constexpr int kRegistersPerSm = 64 * 1024; // every supported arch (sm_80 ... sm_90a)
// Issuing copies and stepping block pointers needs few, but the producer's cp.async fallback (launches with
// illegal tensor maps) spilled 8-16 bytes at 40 in some matmul tiles and nothing at 56 (nvcc -Xptxas -v).
constexpr int kProducerRegisters = 56;
constexpr int kMostConsumerRegisters = 240;

int floor8(int n) { return n / 8 * 8; }

// Where each top-level op of the kernel stands in k.body.ops.
std::map<const Op*, size_t> top_level_positions(const Kernel& k) {
  std::map<const Op*, size_t> at;
  for (size_t i = 0; i < k.body.ops.size(); ++i)
    at[k.body.ops[i].get()] = i;
  return at;
}

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

// The kernel parameter a pointer (or block pointer) is derived from by offsets, shape changes and block-pointer
// steps, or -1 when it comes from elsewhere (a loop-carried value, a loaded pointer).
int pointer_param(const Kernel& k, ValueId v) {
  for (;;) {
    const ValueInfo& info = k.info(v);
    if (info.param_index >= 0)
      return info.param_index;
    const Op* def = info.def;
    if (!def || (def->kind != OpKind::AddPtr && def->kind != OpKind::Broadcast && def->kind != OpKind::ExpandDims &&
                 def->kind != OpKind::Reshape && def->kind != OpKind::MakeBlockPtr && def->kind != OpKind::Advance))
      return -1;
    v = def->operands[0];
  }
}

// The parameters the kernel may write through (stores and atomics anywhere in it); nullopt when a write goes
// through a pointer pointer_param cannot trace.
std::optional<std::set<int>> written_params(const Kernel& k) {
  std::set<int> written;
  bool traced = true;
  walk(k.body, [&](const Op& op) {
    if (op.kind != OpKind::Store && op.kind != OpKind::AtomicAdd && op.kind != OpKind::StoreBlock &&
        op.kind != OpKind::AtomicAddBlock)
      return;
    const int param = pointer_param(k, op.operands[0]);
    traced &= param >= 0;
    written.insert(param);
  });
  return traced ? std::optional(written) : std::nullopt;
}

// The scalars the producer recomputes: the ops behind `needed`, all at the top of the kernel before the last
// specialised loop (position in k.body.ops < `last_loop_at`), in program order. Besides arithmetic, a scalar
// load from a parameter the kernel never writes (a block mask's counts: the same value for the producer and the
// consumers, whenever read). Empty with `why` set when one is not such an op.
std::vector<const Op*> producer_slice(const Kernel& k, const LoweringPlan& plan,
                                      const std::vector<const Op*>& loops, std::vector<ValueId> needed,
                                      std::string& why) {
  const size_t last_loop_at = top_level_positions(k).at(loops.back());
  std::map<const Op*, size_t> top_level = top_level_positions(k);
  const std::optional<std::set<int>> written = written_params(k);
  auto read_only = [&](const Op& load) {
    const int param = pointer_param(k, load.operands[0]);
    return param >= 0 && written && !written->count(param);
  };
  std::set<size_t> slice;
  std::set<ValueId> seen;
  while (!needed.empty()) {
    ValueId v = needed.back();
    needed.pop_back();
    if (!seen.insert(v).second)
      continue;
    const ValueInfo& info = k.info(v);
    if (info.param_index >= 0 || carried_by_producer(k, plan, loops, v))
      continue;
    const Op* def = info.def;
    auto at = def ? top_level.find(def) : top_level.end();
    if (at == top_level.end() || at->second >= last_loop_at) {
      if (def && def->kind == OpKind::Constant)
        continue; // a constant inside the loop: printed inline where it is used
      why = fmt::format("%{} ({}) is not computed at the top of the kernel before the loops", v,
                        def ? def->loc.str() : "a loop variable");
      return {};
    }
    const Placement p = plan.where(v);
    const bool pure = def->kind == OpKind::Constant || def->kind == OpKind::ProgramId ||
                      def->kind == OpKind::NumPrograms || def->kind == OpKind::Unary ||
                      def->kind == OpKind::Binary || def->kind == OpKind::Cast ||
                      def->kind == OpKind::Where || def->kind == OpKind::Fma || def->kind == OpKind::AddPtr ||
                      def->kind == OpKind::MakeBlockPtr || def->kind == OpKind::Advance ||
                      (def->kind == OpKind::Load && read_only(*def));
    if (!pure || (p != Placement::Scalar && p != Placement::BlockPtr)) {
      why = fmt::format(
          "the loops' copies need %{} from {} at {}, which the producer cannot recompute (it reads "
          "only scalars of tensors the kernel never writes, and holds no tiles)",
          v, op_name(def->kind), def->loc.str());
      return {};
    }
    slice.insert(at->second);
    needed.insert(needed.end(), def->operands.begin(), def->operands.end());
  }
  std::vector<const Op*> ops;
  for (size_t i : slice)
    ops.push_back(k.body.ops[i].get());
  return ops;
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
      const int64_t r_end = r.offset + r.bytes_per_stage() * r.stages,
                    t_end = t.offset + t.bytes_per_stage() * t.stages;
      if (t.offset < r_end && r.offset < t_end)
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

void plan_register_reallocation(int consumer_threads, int blocks, WarpSpecialization& ws) {
  ws.entry_registers = ws.producer_registers = ws.consumer_registers = 0;
  const int threads = consumer_threads + WarpSpecialization::kProducerThreads;
  const int per_thread = kRegistersPerSm / (threads * std::max(blocks, 1));
  if (per_thread >= 256)
    return; // every thread may already hold 255
  const int entry = floor8(per_thread);
  if (entry <= kProducerRegisters)
    return;
  const int released = (entry - kProducerRegisters) * WarpSpecialization::kProducerThreads;
  const int consumer = std::min(kMostConsumerRegisters, floor8(entry + released / consumer_threads));
  if (consumer <= entry)
    return;
  ws.entry_registers = entry;
  ws.producer_registers = kProducerRegisters;
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
  plan_register_reallocation(ws.consumer_threads, static_cast<int>(k.config.get_or("MIN_BLOCKS_PER_SM", 1)),
                             ws);
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
