#include "codegen/mma_shape.h"

#include "support/error.h"

#include <fmt/format.h>

namespace kiln {

namespace {

Coord rc(int64_t row, int64_t col) { return Coord{row, col}; }

// The lanes of a quad-based fragment (PTX: groupID = lane >> 2 picks the row, threadID_in_group = lane % 4 the
// column pair, or the column for tf32): lane bits 0-1 step `quad_step` along `quad_dim`, bits 2-4 one row (or
// column) along the other dim.
std::vector<Coord> quad_lanes(int quad_dim, int64_t quad_step) {
  auto along = [&](int dim, int64_t step) { return dim == 0 ? rc(step, 0) : rc(0, step); };
  const int group_dim = 1 - quad_dim;
  return {along(quad_dim, quad_step), along(quad_dim, 2 * quad_step), along(group_dim, 1), along(group_dim, 2),
          along(group_dim, 4)};
}

// The f32 accumulator of an m16n8 mma.sync: c0..c3 at (g, 2t), (g, 2t+1), (g+8, 2t), (g+8, 2t+1).
Fragment m16n8_accumulator() { return {16, 8, {rc(0, 1), rc(8, 0)}, quad_lanes(1, 2), {}}; }

MmaShape make_m16n8k16() {
  MmaShape s;
  s.instruction = MmaInstruction::MmaSyncM16N8K16;
  s.m = 16, s.n = 8, s.k = 16;
  s.elements_per_register = 2;
  // a0..a7: (g, 2t..2t+1), (g+8, 2t..2t+1), (g, 2t+8..2t+9), (g+8, 2t+8..2t+9)
  s.a = {16, 16, {rc(0, 1), rc(8, 0), rc(0, 8)}, quad_lanes(1, 2), {}};
  // b0..b3: (2t..2t+1, g), (2t+8..2t+9, g)
  s.b = {16, 8, {rc(1, 0), rc(8, 0)}, quad_lanes(0, 2), {}};
  s.c = m16n8_accumulator();
  return s;
}

MmaShape make_m16n8k8_tf32() {
  MmaShape s;
  s.instruction = MmaInstruction::MmaSyncM16N8K8Tf32;
  s.m = 16, s.n = 8, s.k = 8;
  s.elements_per_register = 1;
  // a0..a3: (g, t), (g+8, t), (g, t+4), (g+8, t+4)
  s.a = {16, 8, {rc(8, 0), rc(0, 4)}, quad_lanes(1, 1), {}};
  // b0, b1: (t, g), (t+4, g)
  s.b = {8, 8, {rc(4, 0)}, quad_lanes(0, 1), {}};
  s.c = m16n8_accumulator();
  return s;
}

} // namespace

std::pair<int64_t, int64_t> Fragment::reg_offset(int r) const {
  int64_t row = 0, col = 0;
  for (size_t b = 0; b < reg.size(); ++b)
    if (r >> b & 1)
      row += reg[b][0], col += reg[b][1];
  return {row, col};
}

std::pair<int64_t, int64_t> Fragment::element(int w, int l, int r) const {
  auto [row, col] = reg_offset(r);
  for (size_t b = 0; b < lane.size(); ++b)
    if (l >> b & 1)
      row += lane[b][0], col += lane[b][1];
  for (size_t b = 0; b < warp.size(); ++b)
    if (w >> b & 1)
      row += warp[b][0], col += warp[b][1];
  return {row, col};
}

std::string MmaShape::name() const {
  switch (instruction) {
  case MmaInstruction::MmaSyncM16N8K8Tf32:
    return "mma.sync.m16n8k8.tf32";
  case MmaInstruction::WgmmaM64NK16:
    return fmt::format("wgmma.m64n{}k16", n);
  case MmaInstruction::MmaSyncM16N8K16:
    break;
  }
  return "mma.sync.m16n8k16";
}

std::vector<int> MmaShape::packed_registers(int i) const {
  std::vector<int> regs;
  for (int e = 0; e < elements_per_register; ++e)
    regs.push_back(elements_per_register * i + e);
  return regs;
}

const MmaShape& mma_sync_shape(DType in) {
  static const MmaShape m16n8k16 = make_m16n8k16();
  static const MmaShape m16n8k8_tf32 = make_m16n8k8_tf32();
  return in == DType::f32 ? m16n8k8_tf32 : m16n8k16;
}

MmaShape wgmma_shape(int64_t n) {
  KILN_INTERNAL_CHECK(n % 8 == 0 && n >= 8 && n <= 256, "wgmma has no m64n{}k16 shape", n);
  // Each warp of the warpgroup holds 16 rows of A and D in mma.sync's m16 fragments: warp w rows 16w..16w+15,
  // and D's n8 column blocks follow each other in its registers (d[4j..4j+3] is column block j).
  const MmaShape& m16 = mma_sync_shape(DType::f16);
  MmaShape s;
  s.instruction = MmaInstruction::WgmmaM64NK16;
  s.m = 64, s.n = n, s.k = 16;
  s.warps = 4;
  s.elements_per_register = 2;
  const std::vector<Coord> warps = {rc(16, 0), rc(32, 0)};
  s.a = {64, 16, m16.a.reg, m16.a.lane, warps};
  s.b = {}; // B is read from shared memory through a descriptor
  s.c = {64, n, tile_register_bases(m16.c, 1, n, 16, 1), m16.c.lane, warps};
  return s;
}

std::vector<Coord> tile_register_bases(const Fragment& f, int inner_dim, int64_t inner_extent,
                                       int64_t outer_extent, int64_t outer_interleave) {
  const int outer_dim = 1 - inner_dim;
  auto along = [](int dim, int64_t step) { return dim == 0 ? rc(step, 0) : rc(0, step); };
  std::vector<Coord> bases = f.reg;
  for (int64_t e = f.extent(inner_dim); e < inner_extent; e *= 2)
    bases.push_back(along(inner_dim, e));
  for (int64_t e = f.extent(outer_dim); e < outer_extent; e *= 2)
    bases.push_back(along(outer_dim, e * outer_interleave));
  return bases;
}

std::string FragmentTiling::first_register(const std::string& inner, const std::string& outer) const {
  return fmt::format("{} * ({} + {} * {})", fragment_regs, inner, inner_fragments, outer);
}

} // namespace kiln
