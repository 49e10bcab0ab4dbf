#include "codegen/plan_warp_specialization.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>

namespace kiln {

namespace {

constexpr int kRegistersPerSm = 64 * 1024; // every supported arch (sm_80 ... sm_90a)
// Issuing copies and stepping block pointers needs few, but the producer's cp.async fallback (launches with
// illegal tensor maps) spilled 8-16 bytes at 40 in some matmul tiles and nothing at 56 (nvcc -Xptxas -v).
constexpr int kProducerRegisters = 56;
constexpr int kMostConsumerRegisters = 240;

int floor8(int n) { return n / 8 * 8; }

// The scalars the producer recomputes: the ops behind `needed`, all at the top of the kernel before the loop
// (position in k.body.ops < `loop_at`), in program order. Empty with `why` set when one is not such an op.
std::vector<const Op*> producer_slice(const Kernel& k, const LoweringPlan& plan, std::vector<ValueId> needed,
                                      size_t loop_at, std::string& why) {
  std::map<const Op*, size_t> top_level;
  for (size_t i = 0; i < loop_at; ++i)
    top_level[k.body.ops[i].get()] = i;
  std::set<size_t> slice;
  std::set<ValueId> seen;
  while (!needed.empty()) {
    ValueId v = needed.back();
    needed.pop_back();
    if (!seen.insert(v).second)
      continue;
    const ValueInfo& info = k.info(v);
    if (info.param_index >= 0)
      continue;
    const Op* def = info.def;
    auto at = def ? top_level.find(def) : top_level.end();
    if (at == top_level.end()) {
      if (def && def->kind == OpKind::Constant)
        continue; // a constant inside the loop: printed inline where it is used
      why = fmt::format("%{} ({}) is not computed before the loop at the top of the kernel", v,
                        def ? def->loc.str() : "a loop variable");
      return {};
    }
    const Placement p = plan.where(v);
    const bool pure = def->kind == OpKind::Constant || def->kind == OpKind::ProgramId ||
                      def->kind == OpKind::NumPrograms || def->kind == OpKind::Unary || def->kind == OpKind::Binary ||
                      def->kind == OpKind::Cast || def->kind == OpKind::Where || def->kind == OpKind::Fma ||
                      def->kind == OpKind::AddPtr ||
                      def->kind == OpKind::MakeBlockPtr || def->kind == OpKind::Advance;
    if (!pure || (p != Placement::Scalar && p != Placement::BlockPtr)) {
      why = fmt::format("the loop's copies need %{} from {} at {}, which the producer cannot recompute (it reads "
                        "no memory and holds no tiles)",
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

// Why `loop` cannot be split into producer and consumers ("" when it can); fills the producer's ops.
std::string check(const Kernel& k, const LoweringPlan& plan, const Op* loop, std::vector<const Op*>& producer_ops) {
  size_t loop_at = k.body.ops.size();
  for (size_t i = 0; i < k.body.ops.size(); ++i)
    if (k.body.ops[i].get() == loop)
      loop_at = i;
  if (loop_at == k.body.ops.size())
    return fmt::format("the pipelined loop at {} is inside another loop or an if", loop->loc.str());
  if (!plan.unwaited_loads.empty())
    return "a tile loaded before the loop is waited for by the loop's first wait";
  // The producer fills the ring while the consumers run the code before the loop: no other tile may share
  // the ring's bytes.
  const std::vector<const Op*>& loads = plan.pipelined.at(loop);
  for (const SharedTile& t : plan.tiles) {
    if (std::find(loads.begin(), loads.end(), t.load) != loads.end())
      continue;
    for (const Op* l : loads) {
      const SharedTile& r = plan.tiles[plan.tile_of.at(l->result())];
      const int64_t r_end = r.offset + r.bytes_per_stage() * r.stages, t_end = t.offset + t.bytes_per_stage() * t.stages;
      if (t.offset < r_end && r.offset < t_end)
        return fmt::format("the shared tile of %{} shares bytes with the ring of the loop at {}", t.value,
                           loop->loc.str());
    }
  }
  // Bounds, the carried block pointers' initial values and their steps.
  std::vector<ValueId> needed = {loop->operands[0], loop->operands[1], loop->operands[2]};
  for (const Op* l : loads) {
    const PipelinedStep& step = plan.pipelined_steps.at(l);
    needed.push_back(loop->operands[3 + step.carried]);
    needed.insert(needed.end(), step.advance->operands.begin() + 1, step.advance->operands.end());
  }
  std::string why;
  producer_ops = producer_slice(k, plan, needed, loop_at, why);
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
  else if (plan.pipelined.size() != 1)
    ws.why_not = fmt::format("the kernel has {} pipelined loops; a producer serves exactly one", plan.pipelined.size());
  else if (plan.num_warps % 4 != 0)
    ws.why_not = fmt::format("num_warps={} is not whole warpgroups", plan.num_warps);
  if (!ws.why_not.empty())
    return;
  const Op* loop = plan.pipelined.begin()->first;
  if (!plan.tma.loops.count(loop)) {
    auto why = plan.tma.why_not.find(loop);
    ws.why_not = "the loop's tiles are not copied by TMA" +
                 (why != plan.tma.why_not.end() ? " (" + why->second + ")" : std::string());
    return;
  }
  std::vector<const Op*> producer_ops;
  ws.why_not = check(k, plan, loop, producer_ops);
  if (!ws.why_not.empty())
    return;
  ws.loop = loop;
  ws.producer_ops = std::move(producer_ops);
  plan_register_reallocation(ws.consumer_threads, static_cast<int>(k.config.get_or("MIN_BLOCKS_PER_SM", 1)), ws);
  // One more mbarrier per slot: the consumers' release of it (the ring's full barriers are counted by TMA).
  plan.tma.barrier_bytes += 8 * plan.tiles[plan.tile_of.at(plan.pipelined.at(loop).front()->result())].stages;
}

} // namespace kiln
