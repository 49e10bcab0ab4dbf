#include "codegen/describe_plan.h"

#include "codegen/cuda_text.h"
#include "codegen/wgmma.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <functional>

namespace kiln {

namespace {

// "from -> to", with the bases where the two summaries agree (two layouts of one kind and shape differ only
// there).
std::string layouts(const Layout& from, const Layout& to) {
  if (from.str() == to.str())
    return fmt::format("{} [{}] -> [{}]", from.str(), from.bases_str(), to.bases_str());
  return fmt::format("{} -> {}", from.str(), to.str());
}

// How pipelined loop `loop` copies its tiles on a target with TMA ("" elsewhere).
std::string describe_tma(const LoweringPlan& plan, const Op& loop) {
  if (auto why = plan.tma.why_not.find(&loop); why != plan.tma.why_not.end())
    return fmt::format("//     cp.async by every thread, not TMA: {}\n", why->second);
  if (!plan.tma.loops.count(&loop))
    return "";
  std::string s = "//     copied by TMA: one thread per tile, completing on the ring slot's mbarrier; launches whose "
                  "tensor maps break a rule (alignment, strides) take the cp.async path\n";
  for (const Op* load : plan.pipelined.at(&loop)) {
    const TmaCopy& c = plan.tma.copies.at(load);
    const TensorMapParam& m = plan.tma.maps[static_cast<size_t>(c.map)];
    std::string box;
    for (int64_t b : m.box)
      box += (box.empty() ? "" : "x") + std::to_string(b);
    // The base's per-program terms are dims of box 1 (codegen/block_base.h).
    std::string outer;
    for (const OuterDim& o : m.outer)
      outer += fmt::format("{}%{}", outer.empty() ? ", per-program dims at " : " and ", o.coordinate);
    s += fmt::format("//     load at {}: kiln_map{} (make_block_ptr at {}, box {}{}, {}), {} cop{} of {} bytes a stage\n",
                     load->loc.str(), c.map, m.source, box, outer, swizzle_mode_name(m.swizzle), c.panels,
                     c.panels == 1 ? "y" : "ies", c.bytes_per_stage);
  }
  return s;
}

// How the warp-specialised loop `loop` is split ("" when it is not one); the split is told at the first loop,
// the later ones say whose ring they continue.
std::string describe_warp_specialization(const LoweringPlan& plan, const Op& loop) {
  const WarpSpecialization& ws = plan.ws;
  if (!ws.specializes(&loop))
    return "";
  if (ws.loops.front() != &loop)
    return fmt::format("//     warp-specialised: the producer goes on filling the ring of the loop at {} (the same "
                       "slots and barriers, the same bytes)\n",
                       ws.loops.front()->loc.str());
  std::string s = fmt::format(
      "//     warp-specialised: producer warpgroup (threads {}..{}) recomputes {} scalar op(s) and issues every "
      "stage of {} loop(s) by TMA after the consumers release its slot (full and empty mbarriers per slot); the {} "
      "consumer threads issue no copy and meet at named barrier 1, not __syncthreads; a launch whose tensor maps "
      "are illegal runs this config generated without warp specialisation\n",
      ws.consumer_threads, ws.consumer_threads + WarpSpecialization::kProducerThreads - 1, ws.producer_ops.size(),
      ws.loops.size(), ws.consumer_threads);
  if (ws.tile_barriers)
    s += "//     tile barriers (TILE_BARRIERS=1): a full and an empty mbarrier per tile of each slot, the producer "
         "copying each tile once its own readers are done and the consumers waiting for each where it is loaded\n";
  if (ws.consumer_registers)
    s += fmt::format("//     setmaxnreg: producer {} registers, consumers {} (from {} at entry)\n",
                     ws.producer_registers, ws.consumer_registers, ws.entry_registers);
  else
    s += "//     setmaxnreg: registers not moved (the cap at entry leaves the consumers nothing to gain)\n";
  return s;
}

} // namespace

std::string describe_plan(const Kernel& k, const LoweringPlan& plan) {
  std::string s = fmt::format("// lowered {} for {} warps (mma warps {}x{})\n", k.name, plan.num_warps,
                              plan.warps.warps_m, plan.warps.warps_n);
  if (!plan.ws.why_not.empty())
    s += fmt::format("//   not warp-specialised (WARP_SPECIALIZE=1): {}\n", plan.ws.why_not);
  if (plan.pingpong.on())
    s += fmt::format("//   ping-pong: the {} consumer warpgroups issue the {} product(s) of the specialised loops in "
                     "turn, warpgroup g waiting at named barrier {} + g and passing the turn to the next\n",
                     plan.pingpong.warpgroups, plan.pingpong.dots.size(), PingPong::kFirstBarrier);
  else if (!plan.pingpong.why_not.empty())
    s += fmt::format("//   no ping-pong (PINGPONG=1): {}\n", plan.pingpong.why_not);
  if (!plan.ahead.why_not.empty())
    s += fmt::format("//   no product ahead (PRODUCT_AHEAD=1): {}\n", plan.ahead.why_not);
  const auto places = emit_detail::source_lines;
  for (const auto& [loop, late] : plan.late.loops)
    s += fmt::format("//   loop at {}: the product{} at {} {} issued in the next iteration, after the product{} at {}, "
                     "and waited for before the op at {} (its slot held until then)\n",
                     loop->loc.str(), late.last.size() > 1 ? "s" : "", places(late.last),
                     late.last.size() > 1 ? "are" : "is", late.first.size() > 1 ? "s" : "", places(late.first),
                     late.first_reader->loc.str());
  for (const auto& [loop, late] : plan.late.loops)
    if (!late.released_after_first.empty())
      s += fmt::format("//   loop at {}: the tile{} of the load{} at {} go{} back right after the first {} wait, "
                       "the others' with the late product{}\n",
                       loop->loc.str(), late.released_after_first.size() > 1 ? "s" : "",
                       late.released_after_first.size() > 1 ? "s" : "", places(late.released_after_first),
                       late.released_after_first.size() > 1 ? "" : "es",
                       late.first.size() > 1 ? "products'" : "product's", late.last.size() > 1 ? "s" : "");
  for (const auto& [loop, late] : plan.late.loops)
    if (late.continues)
      s += fmt::format("//   loop at {}: its first iteration issues the late product{} of the loop at {}'s last one, "
                       "after its first product{}; its ring starts at the slot that loop stopped at\n",
                       loop->loc.str(), late.last.size() > 1 ? "s" : "", late.continues->loc.str(),
                       late.first.size() > 1 ? "s" : "");
  if (!plan.late.why_not_across_loops.empty())
    s += fmt::format("//   late products not carried across loops: {}\n", plan.late.why_not_across_loops);
  if (!plan.late.why_not.empty())
    s += fmt::format("//   no late product (LAST_PRODUCT_LATE=1): {}\n", plan.late.why_not);
  if (!plan.ws.why_not_tile_barriers.empty())
    s += fmt::format("//   one barrier pair a slot (TILE_BARRIERS=1): {}\n", plan.ws.why_not_tile_barriers);
  for (const ProducerTile& t : plan.producer_tiles.tiles)
    s += fmt::format("//   the shared tile of %{} ({}) copied by the producer by TMA through kiln_map{} ({} cop{}, {} "
                     "bytes in all){}; the consumers wait on its full mbarrier where the program loads it\n",
                     t.load->result(), t.load->loc.str(), t.copy.map, t.copy.panels, t.copy.panels > 1 ? "ies" : "y",
                     t.copy.bytes_per_stage,
                     plan.producer_tiles.buffers == 1 ? ""
                                                      : ", into buffer k % 2 at turn k once the consumers have "
                                                        "released it at the end of turn k - 2");
  if (!plan.producer_tiles.why_not.empty())
    s += fmt::format("//   {}\n", plan.producer_tiles.why_not);
  std::function<void(const Region&)> describe_waits = [&](const Region& r) { // in program order
    for (const auto& op : r.ops) {
      if (auto moved = plan.products.issued_after.find(op.get()); moved != plan.products.issued_after.end())
        s += fmt::format("//   the product at {} issued early, {}\n", op->loc.str(),
                         moved->second ? fmt::format("right after the {} at {}", op_name(moved->second->kind),
                                                     moved->second->loc.str())
                                       : std::string("at the top of its loop body"));
      if (const ProductWait* w = plan.products.before_op(*op))
        s += fmt::format("//   the product{} at {} waited for before the {} at {}{}\n", w->retired.size() > 1 ? "s" : "",
                         places(w->retired), op_name(op->kind), op->loc.str(),
                         w->pending ? fmt::format(", {} later left in flight", w->pending) : "");
      for (const Region& sub : op->regions)
        describe_waits(sub);
      if (auto end = plan.products.at_end.find(op.get()); end != plan.products.at_end.end())
        s += fmt::format("//   the product{} at {} waited for at the end of the body of the loop at {}\n",
                         end->second.size() > 1 ? "s" : "", places(end->second), op->loc.str());
    }
  };
  if (plan.any_wgmma() && k.config.get_or("PRODUCTS_IN_ORDER", 0) != 0)
    s += "//   products issued where the program computes them (PRODUCTS_IN_ORDER=1), each waited for at its first "
         "reader\n";
  describe_waits(k.body);
  for (const auto& [mul, skip] : plan.rescale_skips.ops)
    s += fmt::format("//   rescale at {}: skipped in a warp whose factors (%{}) are all 1 (LAZY_RESCALE=1)\n",
                     mul->loc.str(), skip.factor);
  if (!plan.rescale_skips.why_not.empty())
    s += fmt::format("//   no rescale skipped (LAZY_RESCALE=1): {}\n", plan.rescale_skips.why_not);
  for (const Op* op : plan.exp2_on_fma.ops)
    s += fmt::format("//   exp2 at {}: one register in {} on the FMA pipe (kiln::ex2_fma), the rest on ex2.approx "
                     "(EXP2_ON_FMA={})\n",
                     op->loc.str(), plan.exp2_on_fma.every, plan.exp2_on_fma.every);
  if (!plan.exp2_on_fma.why_not.empty())
    s += fmt::format("//   no exp2 on the FMA pipe (EXP2_ON_FMA={}): {}\n", plan.exp2_on_fma.every,
                     plan.exp2_on_fma.why_not);
  walk(k.body, [&](const Op& loop) { // in program order
    if (const auto* operands = plan.register_operands.before_loop(loop))
      for (const RegisterOperands::Operand& o : *operands)
        s += fmt::format("//   %{}: a shared A read into {} registers a thread before the loop at {} (ldmatrix), wgmma's "
                         "register A for its products there\n",
                         o.value, o.registers, loop.loc.str());
  });
  if (!plan.register_operands.why_not.empty())
    s += fmt::format("//   shared A left in shared memory: {}\n", plan.register_operands.why_not);
  walk(k.body, [&](const Op& loop) { // in program order
    const std::vector<int>* b = plan.uniform.bounds_of(loop);
    if (!b)
      return;
    const std::vector<int>& bounds = *b;
    s += fmt::format("//   loop at {}: its {} read through kiln::warp_uniform before it, so that ptxas keeps the wgmma "
                     "inside overlapped (not in a producer warpgroup)\n",
                     loop.loc.str(), bounds.size() == 2 ? "bounds" : bounds[0] == 0 ? "lower bound" : "upper bound");
  });
  if (!plan.uniform.loads.empty())
    s += fmt::format("//   {} scalar load(s) read through kiln::warp_uniform (not in a producer warpgroup)\n",
                     plan.uniform.loads.size());
  if (plan.persistent.on) {
    if (plan.persistent.dynamic())
      s += fmt::format("//   persistent grid: {} CTA(s) an SM run program blockIdx.x, then each draws its next program id "
                       "from kiln_program_counter{} until past kiln_programs (the launch's grid size)\n",
                       plan.persistent.ctas_per_sm,
                       plan.ws.on() ? " (the producer draws, the consumers read a two-slot ring)" : "");
    else
      s += fmt::format("//   persistent grid: {} CTA(s) an SM walk program ids blockIdx.x + k * gridDim.x below "
                       "kiln_programs (the launch's grid size)\n",
                       plan.persistent.ctas_per_sm);
    for (const PersistentPrefetch& p : plan.persistent.prefetches) {
      if (plan.producer_tiles.index_of(p.load) >= 0)
        s += fmt::format("//     the shared tile of %{} ({}) in two buffers, the second at byte {}: turn k reads buffer "
                         "k % 2, which the producer fills (above)\n",
                         p.load->result(), p.load->loc.str(), p.second_offset);
      else if (p.double_buffered())
        s += fmt::format("//     the shared tile of %{} ({}) prefetched into a second buffer at byte {}: turn k reads "
                         "buffer k % 2, and the next program's copy is issued after the op at {}, where this "
                         "program starts\n",
                         p.load->result(), p.load->loc.str(), p.second_offset,
                         plan.persistent.next_copies_after->loc.str());
      else
        s += fmt::format("//     the shared tile of %{} ({}) prefetched: the next program's copy issued after the op "
                         "at {}, under this program's epilogue\n",
                         p.load->result(), p.load->loc.str(), p.issue_after->loc.str());
    }
    if (!plan.persistent.why_not_prefetch.empty())
      s += fmt::format("//     not prefetched: {}\n", plan.persistent.why_not_prefetch);
    if (!plan.persistent.why_not_second_buffers.empty())
      s += fmt::format("//     one buffer: {}\n", plan.persistent.why_not_second_buffers);
  } else if (!plan.persistent.why_not.empty()) {
    s += fmt::format("//   not persistent (PERSISTENT={}): {}\n", plan.persistent.asked, plan.persistent.why_not);
  }
  for (const SharedTile& t : plan.tiles)
    s += fmt::format("//   shared tile %{}: {} x {} ({} B/elem) x {} stage(s) at byte {}{}{}{}{}\n", t.value,
                     t.rows, t.cols, t.elem_bytes, t.stages, t.offset,
                     t.line_cap < 128 ? fmt::format(", {}-byte lines (a warpgroup's slice)", t.geometry().line_bytes())
                                      : "",
                     t.stages > 1 ? ", cp.async pipelined" : "",
                     !t.to_registers ? ""
                     : k.type(t.value).rank() == 1 ? ", read from its slot where each register is used"
                                                   : ", read into registers where the loop loads it",
                     plan.unwaited_loads.count(t.load) ? ", waited for by the next pipelined loop" : "");
  // Dots, vectorised accesses, block stores and pipelined loops in program order, with their DSL lines.
  walk(k.body, [&](const Op& op) {
    if (op.kind == OpKind::Dot) {
      const DotPlan& d = plan.dots.at(&op);
      auto source = [&](ValueId v) {
        if (v == op.operands[0] && plan.register_operands.products.count(&op))
          return std::string("registers (read from its shared tile once before the loop)");
        if (plan.where(v) == Placement::Shared) {
          if (d.instruction != DotInstruction::Wgmma)
            return std::string("shared");
          // wgmma reads it through a descriptor: K-major when K is the tile's contiguous dim.
          const bool is_a = v == op.operands[0];
          const bool k_major = plan.contiguous_dim(v) == (is_a ? 1 : 0);
          std::optional<WgmmaOperand> o = wgmma_operand(plan.tiles[plan.tile_of.at(v)], k_major);
          return fmt::format("shared {}-major ({})",
                             k_major ? "K"
                             : is_a  ? "M"
                                     : "N",
                             o ? o->descriptor().str() : "no descriptor");
        }
        for (const LayoutConversion& c : plan.conversions) {
          if (c.user != &op || c.value != v || c.method != ConversionMethod::SharedOperand)
            continue;
          const std::string staged = "registers, staged as a K-major shared operand tile in the scratch";
          return c.stmatrix ? staged + " by " + c.stmatrix->str() : staged;
        }
        return std::string(plan.fused_casts.count(v) ? "registers (cast fused)" : "registers");
      };
      const Shape& a = k.type(op.operands[0]).shape;
      const Shape& b = k.type(op.operands[1]).shape;
      const auto own_split = plan.dot_warps.find(&op);
      const std::string split =
          own_split == plan.dot_warps.end()
              ? ""
              : fmt::format(", over {}x{} warps of its own (fewer rows than the kernel's split spreads over)",
                            own_split->second.warps_m, own_split->second.warps_n);
      s += fmt::format("//   dot %{} ({}x{} @ {}x{}) at {}: {}, A {}, B {}{}{}{}{}{}\n", op.result(), a[0], a[1],
                       b[0], b[1], op.loc.str(), dot_instruction_name(d.instruction), source(op.operands[0]),
                       source(op.operands[1]), split, plan.is_deferred_dot(op) ? ", one product left in flight" : "",
                       plan.pingpong.dots.count(&op) ? ", issued in turn (ping-pong)" : "",
                       plan.ahead.loop_of(op) ? ", issued one iteration ahead (in flight under the rest of the "
                                                "iteration)"
                                              : "",
                       d.why_not_wgmma.empty() ? "" : " (not wgmma: " + d.why_not_wgmma + ")");
    } else if (auto it = plan.accesses.find(&op); it != plan.accesses.end()) {
      const AccessPlan& a = it->second;
      if (a.vector > 1 || a.reduce_only)
        s += fmt::format("//   {} at {}: {}{}{}{}\n",
                         op.kind == OpKind::Load    ? "load"
                         : op.kind == OpKind::Store ? "store"
                                                    : "atomic_add",
                         op.loc.str(),
                         a.vector > 1 ? fmt::format("{}-element vectors", a.vector) : "element by element",
                         a.aligned ? " (aligned by multiple_of)" : "",
                         a.reduce_only ? ", as red (old values unread)" : "",
                         plan.unordered_reductions.count(&op) ? ", unordered (no read goes back to its tensor)" : "");
    } else if (auto it = plan.block_accesses.find(&op);
               it != plan.block_accesses.end() && op.kind != OpKind::AtomicAddBlock) { // atomic adds: below
      const bool staged = op.kind == OpKind::LoadBlock && plan.tile_of.count(op.result());
      if (staged)
        s += fmt::format("//   block load at {}: read from its ring slot{} (staged by {})\n", op.loc.str(),
                         k.type(op.result()).rank() == 1 ? " where each register is used" : "",
                         plan.tma.copies.count(&op) ? "TMA" : "cp.async");
      else if (it->second.piece > 0 && !plan.tma_stores.ops.count(&op)) // TMA stores: below
        s += fmt::format("//   block {} at {}: {}-element pieces\n", op.kind == OpKind::LoadBlock ? "load" : "store",
                         op.loc.str(), it->second.piece);
    } else if (op.kind == OpKind::For) {
      auto it = plan.pipelined.find(&op);
      if (it == plan.pipelined.end())
        return;
      const int stages = plan.tiles[plan.tile_of.at(it->second.front()->result())].stages;
      s += fmt::format("//   loop at {}: {} tile(s) in a {}-stage ring, issued {} iteration(s) ahead\n",
                       op.loc.str(), it->second.size(), stages, plan.lookahead(&op, stages));
      s += describe_tma(plan, op);
      s += describe_warp_specialization(plan, op);
    }
  });
  std::map<std::string, int> kinds;
  for (const auto& [v, l] : plan.layout)
    kinds[l.kind_name()]++;
  for (const auto& [kind, n] : kinds)
    s += fmt::format("//   {} values in {} layouts\n", n, kind);
  s += fmt::format("//   shared memory: tiles {} B + scratch {} B; layout conversions through shared memory: {}, "
                   "by register shuffles: {}\n",
                   plan.tiles_bytes, plan.scratch_bytes, plan.conversions_by(ConversionMethod::SharedMemory),
                   plan.conversions_by(ConversionMethod::RegisterShuffles));
  if (plan.bulk.any())
    s += fmt::format("//   bulk-reduction {}{} B at {}\n", plan.bulk.stages == 2 ? "stages: 2 x " : "stage: ",
                     plan.bulk.stage_bytes, plan.bulk.stage_offset);
  walk(k.body, [&](const Op& op) {
    if (op.kind != OpKind::AtomicAddBlock)
      return;
    if (auto it = plan.bulk.ops.find(&op); it != plan.bulk.ops.end()) {
      const BulkReduction& b = it->second;
      if (b.by_tma())
        s += fmt::format("//   atomic_add at {}: {} row(s) of {} f32 through the stage in the shared format, one TMA "
                         "reduction a {}-byte panel through kiln_map{} ({} a use; the map drops what lies past the "
                         "tensor); {}\n",
                         op.loc.str(), b.rows, b.cols, b.panel_elems() * 4, b.map, b.panels(), b.writes.str());
      else
        s += fmt::format("//   atomic_add at {}: {} row(s) of {} f32 through the stage, one bulk reduction for the "
                         "block where its rows are contiguous and inside, else one a row (not by TMA: {}); {}\n",
                         op.loc.str(), b.rows, b.cols, b.why_not_tma, b.writes.str());
    } else {
      const auto pieces = plan.block_accesses.find(&op);
      const int run = pieces == plan.block_accesses.end() ? 0 : pieces->second.piece;
      s += fmt::format("//   atomic_add at {}: {} ({}){}\n", op.loc.str(),
                       run ? fmt::format("{}-element vector reductions from registers", run) : "element by element",
                       plan.bulk.why_not.at(&op),
                       plan.unordered_reductions.count(&op) ? ", unordered (no read goes back to its tensor)" : "");
    }
  });
  if (plan.tma_stores.any())
    s += fmt::format("//   TMA store stage: {} B at {}\n", plan.tma_stores.stage_bytes, plan.tma_stores.stage_offset);
  walk(k.body, [&](const Op& op) {
    if (op.kind != OpKind::StoreBlock)
      return;
    if (auto it = plan.tma_stores.ops.find(&op); it != plan.tma_stores.ops.end())
      s += fmt::format("//   store at {}: by TMA through kiln_map{} ({} panel(s) of {} elements) from the stage, "
                       "written by {}{}\n",
                       op.loc.str(), it->second.map, it->second.panels, it->second.panel_elems,
                       it->second.writes.str(),
                       it->second.waits_for_stage ? ", once the stage's last store has read it" : "");
    else if (auto why = plan.tma_stores.why_not.find(&op); why != plan.tma_stores.why_not.end())
      s += fmt::format("//   store at {}: from registers, not by TMA: {}\n", op.loc.str(), why->second);
  });
  for (const LayoutConversion& c : plan.conversions) {
    const std::string how = c.method == ConversionMethod::RegisterShuffles
                                ? fmt::format("{} lane exchange(s)", c.swaps.size())
                                : fmt::format("{} B of scratch", c.scratch_bytes);
    s += fmt::format("//     convert %{} at {} ({}): {}, {} ({}){}\n", c.value, c.loc().str(), op_name(c.user->kind),
                     layouts(c.from, c.to), conversion_method_name(c.method), how,
                     c.hoisted_before ? fmt::format(", made once before the loop at {}", c.hoisted_before->loc.str())
                                      : "");
  }
  return s;
}


} // namespace kiln
