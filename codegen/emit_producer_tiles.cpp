// Emitter: the shared tiles a warp-specialised producer copies by TMA before the loops (ProducerTiles in
// codegen/lowering_plan.h; plan_producer_tiles.h says which).
//
// Tile i of buffer b has kiln_tile_full[i * B + b] (B buffers a tile): the producer's one arrival announces
// the tile's bytes and its copies, one a 128-byte column panel, complete the transaction. With one buffer (a
// CTA runs one program) the consumers wait for parity 0 and nothing is released. With two (a persistent
// grid), turn k uses buffer k & 1 for the (k >> 1)-th time: the consumers wait for that parity, and at the
// program's end each consumer warp arrives on kiln_tile_empty[i * 2 + (k & 1)]; the producer waits for the
// parity before it before copying turn k's tile, so the first two turns find both buffers free, as the
// program ring's slots are (emit_persistent_grid.cpp).
#include "codegen/emitter.h"

namespace kiln::emit_detail {

namespace {

// The index of tile i's barrier for this program's buffer.
std::string tile_barrier_index(const ProducerTiles& p, int i) {
  return p.buffers == 1 ? std::to_string(i) : fmt::format("{} + (kiln_turn & 1)", i * p.buffers);
}

// The parity the (k >> 1)-th use of a buffer completes (0 with one buffer).
std::string fill_parity(const ProducerTiles& p) { return p.buffers == 1 ? "0" : "(kiln_turn >> 1) & 1"; }

} // namespace

std::string Emitter::producer_tile_declarations() const {
  const ProducerTiles& p = plan_.producer_tiles;
  if (!p.on())
    return "";
  const size_t n = p.tiles.size() * static_cast<size_t>(p.buffers);
  std::string s =
      fmt::format("  __shared__ __align__(8) unsigned long long kiln_tile_full[{}]; // the tile{} the "
                  "producer copies before the loops: {}\n",
                  n, p.tiles.size() > 1 ? "s" : "", p.buffers == 1 ? "one buffer" : "two buffers each");
  if (p.buffers > 1)
    s += fmt::format(
        "  __shared__ __align__(8) unsigned long long kiln_tile_empty[{}]; // the consumers' releases, "
        "at a program's end\n",
        n);
  return s;
}

std::string Emitter::producer_tile_init() const {
  const ProducerTiles& p = plan_.producer_tiles;
  if (!p.on())
    return "";
  const size_t n = p.tiles.size() * static_cast<size_t>(p.buffers);
  if (p.buffers == 1)
    return fmt::format("    for (int s = 0; s < {}; ++s)\n      "
                       "kiln::mbarrier_init(kiln::smem_u32(&kiln_tile_full[s]), 1);\n",
                       n);
  return fmt::format("    for (int s = 0; s < {}; ++s) {{\n"
                     "      kiln::mbarrier_init(kiln::smem_u32(&kiln_tile_full[s]), 1);\n"
                     "      kiln::mbarrier_init(kiln::smem_u32(&kiln_tile_empty[s]), {});\n    }}\n",
                     n, plan_.num_warps);
}

void Emitter::emit_producer_tile_copy(const Op& load) {
  const ProducerTiles& p = plan_.producer_tiles;
  const int i = p.index_of(&load);
  const ProducerTile& pt = p.tiles[static_cast<size_t>(i)];
  const SharedTile& t = plan_.tiles[plan_.tile_of.at(load.result())];
  const TensorMapParam& m = plan_.tma.maps[static_cast<size_t>(pt.copy.map)];
  const std::string index = tile_barrier_index(p, i);
  line("// producer: the tile of {} ({}), [{} x {}] by TMA{}", load.loc.str(), value_hint(load.result()),
       t.rows, t.cols, p.buffers == 1 ? "" : " into buffer turn % 2");
  if (p.buffers > 1)
    line("kiln::mbarrier_wait(kiln::smem_u32(&kiln_tile_empty[{}]), ((kiln_turn >> 1) & 1) ^ 1); // the "
         "buffer's last program is done with it",
         index);
  const bool warp_issues = plan_.persistent.dynamic(); // the producer's first warp runs, lane 0 issues
  if (warp_issues)
    line("if (kiln_ptid == 0) {{");
  else
    line("{{");
  open();
  const std::string bar = fresh("bar");
  line("const unsigned {} = kiln::smem_u32(&kiln_tile_full[{}]);", bar, index);
  line("kiln::mbarrier_arrive_expect_tx({}, {});", bar, pt.copy.bytes_per_stage);
  const std::string buffer = p.buffers == 1 ? "" : fmt::format(" + (kiln_turn & 1) * {}", stage_stride(t));
  const std::string bp = scalar(load.operands[0]);
  const std::string outer = tma_outer_coordinates(m, bp);
  const size_t rank = m.order.size() + m.outer.size();
  const SharedTileGeometry g = t.geometry();
  for (int panel = 0; panel < pt.copy.panels; ++panel)
    line(
        "kiln::tma_load_{}d(kiln::smem_u32(kiln_smem + {}{} + {}), &kiln_map{}, (int){}.off[{}] + {}{}, {});",
        rank, t.offset, buffer, panel * g.panel_bytes(), pt.copy.map, bp, m.order[0],
        panel * pt.copy.panel_elems, outer, bar);
  close();
  line("}}");
}

void Emitter::emit_producer_tile_wait(const Op& load) {
  const ProducerTiles& p = plan_.producer_tiles;
  line("kiln::mbarrier_wait(kiln::smem_u32(&kiln_tile_full[{}]), {}); // {}: the producer's TMA copy has "
       "landed",
       tile_barrier_index(p, p.index_of(&load)), fill_parity(p), load.loc.str());
  // Then, where the consumers are one warpgroup, their barrier: ptxas takes the code after a wait's loop for
  // a divergent path and serialises that warpgroup's products after it (C7520, dK/dV's and dQ's one-warpgroup
  // tiles) unless it meets after each wait (after the last alone was not enough for dK/dV's K and V). Two or
  // three consumer warpgroups compile without it, and FA2's two-warpgroup tile measured 2-4 % faster so.
  if (plan_.num_warps <= 4) // one warpgroup
    line("{} // the consumers reconverge before the products (ptxas C7520 otherwise)", cta_barrier());
  set_scratch_reads(ScratchReads::None);
}

void Emitter::emit_producer_tile_releases() {
  const ProducerTiles& p = plan_.producer_tiles;
  if (!p.on() || p.buffers == 1)
    return;
  if (plan_.any_wgmma())
    line("kiln::wgmma_wait<0>(); // no product of this thread reads the tiles the producer copies ...");
  line("__syncwarp(); // ... nor any of this warp's lanes");
  line("if (kiln_lane == 0) {{");
  for (size_t i = 0; i < p.tiles.size(); ++i)
    line("  kiln::mbarrier_arrive(kiln::smem_u32(&kiln_tile_empty[{}])); // {}'s buffer",
         tile_barrier_index(p, static_cast<int>(i)), p.tiles[i].load->loc.str());
  line("}}");
}

} // namespace kiln::emit_detail
