// Emitter: the producer warpgroup of a warp-specialised kernel and the consumers' slot releases (see
// WarpSpecialization in codegen/lowering_plan.h).
//
// The specialised loops share one ring r, with two mbarriers per slot. kiln_full<r>[s] completes when the
// slot's tiles have landed: one producer thread arrives per tile announcing its bytes, and the TMA copies complete
// the transaction. The producer copies by TMA alone: a launch whose tensor maps are illegal runs the config
// generated without warp specialisation (GeneratedKernel::illegal_maps_fallback), so the producer keeps no
// cp.async path and its registers go to the consumers. kiln_empty<r>[s] completes when every consumer warp has
// released the slot.
// The producer waits for a slot's release before filling it; its parity bits start at 1, so the first pass over
// the ring, whose slots no one has used yet, does not wait. With tile barriers (plan_tile_barriers.h) each tile of
// a slot has its own pair, and the producer waits for each tile's release before copying that tile. Both sides
// start each loop at slot 0, or, where a loop issues the late products of the loop before (LateProduct::continues),
// at the slot that loop stopped at, and flip a slot's parity bit at each use, so their sequences of uses match
// across the loops.
#include "codegen/emitter.h"

namespace kiln::emit_detail {

void Emitter::emit_producer() {
  const WarpSpecialization& ws = plan_.ws;
  // A dynamic persistent grid's program id comes from shared memory: the producer's first warp runs the loop
  // whole, so that kiln::warp_uniform can tell ptxas the id (and what it computes from it) is uniform, and lane 0
  // issues the TMA copies (emit_persistent_grid.cpp). Read by one thread, the id spilled the producer's registers.
  if (plan_.persistent.dynamic()) {
    line("if (threadIdx.x < {}) {{ // the producer's first warp, lane 0 issuing", threads_ + 32);
    open();
    line("const int kiln_ptid = threadIdx.x - {};", threads_);
  } else {
    line("if (threadIdx.x == {}) {{ // one thread issues every copy", threads_);
    open();
  }
  const std::string released = fresh("release_phase");
  if (ws.tile_barriers)
    line("unsigned {} = ~0u; // bit s * {} + t: the parity of tile t of slot s's next release (the first pass finds "
         "every tile free)",
         released, plan_.ring_tiles_per_slot());
  else
    line("unsigned {} = ~0u; // bit s: the parity of slot s's next release (the first pass finds every slot free)",
         released);
  if (plan_.persistent.on)
    open_producer_program_loop(); // the consumers' program ids, in their order
  // The copies in program order, the tiles loaded before the loops (plan_producer_tiles.h) and the loops' rings,
  // each after the scalars it needs that come before it in the program; a later loop may start from the block
  // pointers an earlier one leaves.
  auto position = [&](const Op* op) { // in the kernel's top-level ops, where the producer's ops all are
    return std::find_if(k_.body.ops.begin(), k_.body.ops.end(), [&](const auto& o) { return o.get() == op; }) -
           k_.body.ops.begin();
  };
  std::vector<const Op*> copies = ws.loops;
  for (const ProducerTile& t : plan_.producer_tiles.tiles)
    copies.push_back(t.load);
  std::stable_sort(copies.begin(), copies.end(), [&](const Op* a, const Op* b) { return position(a) < position(b); });
  size_t next_op = 0;
  for (const Op* copy : copies) {
    const bool loop = copy->kind == OpKind::For;
    if (loop)
      line("// producer: the scalars the loop at {} needs, then its copies", copy->loc.str());
    for (; next_op < ws.producer_ops.size() && position(ws.producer_ops[next_op]) < position(copy); ++next_op)
      emit_scalar_op(*ws.producer_ops[next_op]);
    if (loop)
      emit_producer_loop(*copy, released);
    else
      emit_producer_tile_copy(*copy);
  }
  if (plan_.persistent.on) {
    close();
    line("}}");
  }
  close();
  line("}}");
}

void Emitter::emit_producer_loop(const Op& loop, const std::string& released) {
  const Region& body = loop.regions[0];
  const std::vector<const Op*>& loads = plan_.pipelined.at(&loop);
  const int stages = plan_.tiles[plan_.tile_of.at(loads.front()->result())].stages;
  const int ring = plan_.tma.loops.at(&loop);
  // The carried block pointers of the loads, from their initial values, and the steps their advances take;
  // after the loop they are the loop's results (where a later loop starts).
  std::vector<std::string> bps, steps;
  for (const Op* l : loads) {
    const PipelinedStep& step = plan_.pipelined_steps.at(l);
    bps.push_back(fresh("bp"));
    line("auto {} = {};", bps.back(), scalar(loop.operands[3 + step.carried]));
    steps.push_back(advance_steps(*step.advance, ""));
  }
  const std::string slot = fresh("slot"), iv = fresh("i");
  auto late = plan_.late.loops.find(&loop);
  if (late != plan_.late.loops.end() && late->second.continues)
    line("int {} = {}; // where the loop at {} stopped, as the consumers' ring does", slot,
         producer_slot_.at(late->second.continues), late->second.continues->loc.str());
  else
    line("int {} = 0; // the loop starts at slot 0, as the consumers' does", slot);
  producer_slot_[&loop] = slot;
  line("for ({} {} = {}; {} < {}; {} += {}) {{", ctype(k_.type(body.args[0]).elem), iv, scalar(loop.operands[0]), iv,
       scalar(loop.operands[1]), iv, scalar(loop.operands[2]));
  open();
  const bool warp_issues = plan_.persistent.dynamic(); // one lane of a warp issues
  // Each tile after its own release (tile barriers), or the slot's tiles after the slot's.
  const size_t waits = plan_.ws.tile_barriers ? loads.size() : 1;
  for (size_t w = 0; w < waits; ++w) {
    const int tile = static_cast<int>(w);
    const std::string bit = ring_bit(slot, tile);
    line("kiln::mbarrier_wait(kiln::smem_u32(&{}), ({} >> {}) & 1u);", ring_barrier("empty", ring, slot, tile),
         released, bit);
    line("{} ^= 1u << {};", released, bit);
    if (warp_issues) {
      line("if (kiln_ptid == 0) {{");
      open();
    }
    for (size_t i = 0; i < loads.size(); ++i)
      if (waits == 1 || i == w)
        emit_tma_issue(*loads[i], bps[i], slot);
    if (warp_issues) {
      close();
      line("}}");
    }
  }
  for (size_t i = 0; i < loads.size(); ++i)
    line("{0} = {0}.advanced({{{1}}});", bps[i], steps[i]);
  line("{0} = {0} + 1 == {1} ? 0 : {0} + 1;", slot, stages);
  close();
  line("}}");
  for (size_t i = 0; i < loads.size(); ++i)
    name_[loop.results[plan_.pipelined_steps.at(loads[i]).carried]] = bps[i];
}

void Emitter::emit_slot_release(const Op& loop, const std::string& slot) {
  if (plan_.ws.tile_barriers) {
    emit_tile_releases(loop, slot, plan_.pipelined.at(&loop));
    return;
  }
  line("__syncwarp(); // every lane of this warp is done with the slot");
  line("if (kiln_lane == 0)");
  line("  kiln::mbarrier_arrive(kiln::smem_u32(&kiln_empty{}[{}]));", plan_.tma.loops.at(&loop), slot);
}

void Emitter::emit_tile_releases(const Op& loop, const std::string& slot, const std::vector<const Op*>& loads) {
  line("__syncwarp(); // every lane of this warp is done with the tile{} of {}", loads.size() > 1 ? "s" : "",
       source_lines(loads));
  line("if (kiln_lane == 0) {{");
  for (const Op* l : loads)
    line("  kiln::mbarrier_arrive(kiln::smem_u32(&{}));",
         ring_barrier("empty", plan_.tma.loops.at(&loop), slot, plan_.ring_tile_index(&loop, l)));
  line("}}");
}

} // namespace kiln::emit_detail
