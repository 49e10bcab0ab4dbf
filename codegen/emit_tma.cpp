// Emitter: TMA copies of pipelined tiles (see emitter.h and codegen/tma_plan.h).
//
// Ring r of a TMA-copied loop has one mbarrier per slot (kiln_full<r>[slot]), initialised by thread 0 to
// expect one arrival per tile of the stage. Issuing a stage, thread 0 arrives on the slot's barrier
// announcing the tile's bytes and starts one TMA copy per 128-byte column panel; the copies complete the
// transaction. Waiting, every thread waits for the slot's next phase: bit `slot` of kiln_phase<r> holds its
// parity, flipped at each wait, so the count survives loops that run again inside an outer loop. Every
// copy and wait sits behind `kiln_tma` (a launch argument), whose else branch is the cp.async path; a
// warp-specialised kernel has no such branch (its launches with illegal maps run the unspecialised rendering).
// With WarpSpecialization::tile_barriers each tile of a slot has its barrier (and parity bit) of its own, and the
// consumers wait for each tile where it is loaded (emit_tile_wait) instead of for the slot at the loop's first load.
#include "codegen/emitter.h"

namespace kiln::emit_detail {

std::string Emitter::tma_ring_declarations() const {
  if (!plan_.tma.any())
    return "";
  std::string s;
  std::string init;
  // The loops of each ring in program order (a warp-specialised kernel's loops share one).
  std::vector<std::vector<const Op*>> loops_of_ring;
  walk(k_.body, [&](const Op& op) {
    auto it = plan_.tma.loops.find(&op);
    if (it == plan_.tma.loops.end())
      return;
    loops_of_ring.resize(std::max(loops_of_ring.size(), static_cast<size_t>(it->second) + 1));
    loops_of_ring[static_cast<size_t>(it->second)].push_back(&op);
  });
  for (size_t ring = 0; ring < loops_of_ring.size(); ++ring) {
    const Op* loop = loops_of_ring[ring].front();
    const std::vector<const Op*>& loads = plan_.pipelined.at(loop);
    const int stages = plan_.ring_tile(loop).stages;
    const std::string where = source_lines(loops_of_ring[ring]);
    const char* loops_word = loops_of_ring[ring].size() > 1 ? "s" : "";
    if (plan_.ws.specializes(loop) && plan_.ws.tile_barriers) {
      // A barrier pair per tile of each slot: full when the tile's copy lands (the producer's one arrival), empty
      // when every consumer warp has released the tile.
      s += fmt::format("  __shared__ __align__(8) unsigned long long kiln_full{}[{} * {}]; // TMA ring of the loop{} "
                       "at {}: a barrier per tile of each slot\n",
                       ring, stages, loads.size(), loops_word, where);
      s += fmt::format("  unsigned kiln_phase{} = 0; // bit s * {} + t: the parity tile t of slot s completes next\n",
                       ring, loads.size());
      s += fmt::format("  __shared__ __align__(8) unsigned long long kiln_empty{}[{} * {}]; // the consumers' releases, "
                       "a tile at a time\n",
                       ring, stages, loads.size());
      init += fmt::format("    for (int s = 0; s < {} * {}; ++s) {{\n"
                          "      kiln::mbarrier_init(kiln::smem_u32(&kiln_full{}[s]), 1);\n"
                          "      kiln::mbarrier_init(kiln::smem_u32(&kiln_empty{}[s]), {});\n    }}\n",
                          stages, loads.size(), ring, ring, plan_.num_warps);
      continue;
    }
    s += fmt::format("  __shared__ __align__(8) unsigned long long kiln_full{}[{}]; // TMA ring of the loop{} at {}\n",
                     ring, stages, loops_word, where);
    s += fmt::format("  unsigned kiln_phase{} = 0; // bit s: the parity slot s completes next\n", ring);
    if (!plan_.ws.specializes(loop)) {
      init += fmt::format("    for (int s = 0; s < {}; ++s)\n      kiln::mbarrier_init(kiln::smem_u32(&kiln_full{}[s]), {});\n",
                          stages, ring, loads.size());
      continue;
    }
    // Warp-specialised: a slot is full when the producer's copies land (one arrival per tile) and empty when
    // every consumer warp has released it.
    s += fmt::format("  __shared__ __align__(8) unsigned long long kiln_empty{}[{}]; // the consumers' releases\n",
                     ring, stages);
    init += fmt::format("    for (int s = 0; s < {}; ++s) {{\n"
                        "      kiln::mbarrier_init(kiln::smem_u32(&kiln_full{}[s]), {});\n"
                        "      kiln::mbarrier_init(kiln::smem_u32(&kiln_empty{}[s]), {});\n    }}\n",
                        stages, ring, loads.size(), ring, plan_.num_warps);
  }
  s += producer_tile_declarations(); // the tiles a producer copies before the loops, with the rings
  init += producer_tile_init();
  init += program_ring_init(); // a warp-specialised dynamic grid's ring of program ids, with the others
  // Initialised on every launch of a warp-specialised kernel (it runs only launches whose maps are legal), and
  // otherwise only on TMA launches (the cp.async path waits on no barrier).
  s += fmt::format("  if ({}threadIdx.x == 0) {{\n", plan_.ws.on() ? "" : "kiln_tma && ") + init +
       "    kiln::mbarrier_init_fence();\n  }\n";
  s += "  __syncthreads(); // the barriers are initialised before anyone waits on them\n";
  return s;
}

// A copy's coordinates after its first (the contiguous dim's, which each panel moves): the block's other dims in
// its order, then the per-program terms of its base, as ", c1, c2, ...".
std::string Emitter::tma_outer_coordinates(const TensorMapParam& m, const std::string& bp) {
  std::string outer;
  for (size_t d = 1; d < m.order.size(); ++d)
    outer += fmt::format(", (int){}.off[{}]", bp, m.order[d]);
  for (const OuterDim& o : m.outer)
    outer += fmt::format(", (int){}", scalar(o.coordinate));
  return outer;
}

void Emitter::emit_tma_issue(const Op& load, const std::string& bp, const std::string& slot) {
  const SharedTile& t = plan_.tiles[plan_.tile_of.at(load.result())];
  const TmaCopy& c = plan_.tma.copies.at(&load);
  const TensorMapParam& m = plan_.tma.maps[static_cast<size_t>(c.map)];
  const Op* loop = t.loop();
  const int ring = plan_.tma.loops.at(loop);
  const std::string bar = fresh("bar");
  line("const unsigned {} = kiln::smem_u32(&{});", bar,
       ring_barrier("full", ring, slot, plan_.ring_tile_index(loop, &load)));
  line("kiln::mbarrier_arrive_expect_tx({}, {}); // {} -> shared [{} x {}]", bar, c.bytes_per_stage, load.loc.str(),
       t.rows, t.cols);
  const SharedTileGeometry g = t.geometry();
  const std::string outer = tma_outer_coordinates(m, bp);
  const size_t rank = m.order.size() + m.outer.size();
  for (int p = 0; p < c.panels; ++p)
    line("kiln::tma_load_{}d(kiln::smem_u32(kiln_smem + {} + ({}) * {} + {}), &kiln_map{}, (int){}.off[{}] + {}{}, {});",
         rank, t.offset, slot, t.bytes_per_stage(), p * g.panel_bytes(), c.map, bp, m.order[0], p * c.panel_elems,
         outer, bar);
}

// The stage is a tile of kiln's shared format (128-byte panels, swizzled 16-byte chunks), which is what the tensor
// map's box and swizzle read: the inverse of a TMA load into a ring slot. Every consumer thread writes (replicas the
// same values: stmatrix is a warp's instruction), so no owner predicate.
void Emitter::emit_tma_store(const Op& op, const TmaStore& ts, const std::string& bp, const Layout& L,
                             const std::string& x) {
  const TensorMapParam& m = plan_.tma.maps[static_cast<size_t>(ts.map)];
  SharedTile stage;
  stage.rows = ts.rows;
  stage.cols = ts.cols;
  stage.elem_bytes = 2;
  stage.offset = plan_.tma_stores.stage_offset;
  line("{{ // {} by TMA: to the store stage [{} x {}] by {}, then one thread stores it through kiln_map{} (the map "
       "drops what lies past the tensor)",
       op.loc.str(), ts.rows, ts.cols, ts.writes.str(), ts.map);
  open();
  if (ts.waits_for_stage) {
    line("if (threadIdx.x == 0)");
    line("  kiln::bulk_wait_read<0>(); // the stage's last TMA store has read it ...");
    line("{} // ... before any thread writes it again", cta_barrier());
    set_scratch_reads(ScratchReads::None);
  }
  emit_stmatrix_stores(L, ts.writes, x, stage);
  line("kiln::fence_proxy_async(); // the stage is visible to the TMA unit ...");
  line("{} // ... once every thread has written its part", cta_barrier());
  set_scratch_reads(ScratchReads::None);
  const std::string outer = tma_outer_coordinates(m, bp);
  const size_t rank = m.order.size() + m.outer.size();
  const SharedTileGeometry g = geometry(stage);
  line("if (threadIdx.x == 0) {{");
  for (int p = 0; p < ts.panels; ++p)
    line("  kiln::tma_store_{}d(&kiln_map{}, (int){}.off[{}] + {}{}, kiln::smem_u32(kiln_smem + {}));", rank, ts.map,
         bp, m.order[0], p * ts.panel_elems, outer, stage.offset + p * g.panel_bytes());
  line("  kiln::bulk_commit();");
  line("}}");
  close();
  line("}}");
}

std::string Emitter::ring_barrier(const char* kind, int ring, const std::string& slot, int tile) const {
  if (!plan_.ws.tile_barriers)
    return fmt::format("kiln_{}{}[{}]", kind, ring, slot);
  return fmt::format("kiln_{}{}[({}) * {} + {}]", kind, ring, slot, plan_.ring_tiles_per_slot(), tile);
}

std::string Emitter::ring_bit(const std::string& slot, int tile) const {
  if (!plan_.ws.tile_barriers)
    return slot;
  return fmt::format("(({}) * {} + {})", slot, plan_.ring_tiles_per_slot(), tile);
}

void Emitter::emit_tile_wait(const Op& loop, const Op& load, const std::string& stage) {
  const int r = plan_.tma.loops.at(&loop), tile = plan_.ring_tile_index(&loop, &load);
  const std::string bit = ring_bit(stage, tile);
  line("kiln::mbarrier_wait(kiln::smem_u32(&{}), (kiln_phase{} >> {}) & 1u); // {}'s tile alone",
       ring_barrier("full", r, stage, tile), r, bit, load.loc.str());
  line("kiln_phase{} ^= 1u << {};", r, bit);
}

void Emitter::emit_stage_wait(const Op& loop, const SharedTile& first, const std::string& stage) {
  const std::string cp_async_wait = fmt::format("kiln::cp_async_wait<{}>();", plan_.lookahead(&loop, first.stages) - 1);
  auto ring = plan_.tma.loops.find(&loop);
  if (ring == plan_.tma.loops.end()) {
    line("{}", cp_async_wait);
    return;
  }
  const int r = ring->second;
  if (plan_.ws.specializes(&loop)) { // the producer's TMA copies complete the slot
    line("kiln::mbarrier_wait(kiln::smem_u32(&kiln_full{}[{}]), (kiln_phase{} >> {}) & 1u);", r, stage, r, stage);
    line("kiln_phase{} ^= 1u << {};", r, stage);
    return;
  }
  line("if (kiln_tma) {{");
  line("  kiln::mbarrier_wait(kiln::smem_u32(&kiln_full{}[{}]), (kiln_phase{} >> {}) & 1u);", r, stage, r, stage);
  line("  kiln_phase{} ^= 1u << {};", r, stage);
  if (!plan_.unwaited_loads.empty())
    line("  kiln::cp_async_wait_all(); // tiles loaded before the loop by cp.async");
  line("}} else {{");
  line("  {}", cp_async_wait);
  line("}}");
}

} // namespace kiln::emit_detail
