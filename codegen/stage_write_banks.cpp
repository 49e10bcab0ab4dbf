#include "codegen/stage_write_banks.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

namespace kiln {

namespace {

constexpr int kLanes = 32, kLaneBits = 5, kBanks = 32;

int64_t along(const Coord& c, int dim) { return dim < 0 ? 0 : c[static_cast<size_t>(dim)]; }

bool all_zero(const Coord& c) {
  return std::all_of(c.begin(), c.end(), [](int64_t x) { return x == 0; });
}

// One warp's writes of `L` to the stage, as a function of the lanes' masks.
struct WarpWrites {
  const Layout& L;
  int row_dim, col_dim;
  int64_t row_stride;
  int vector;
  const SharedTileGeometry* format; // nullptr: rows back to back

  // The f32 word lane `lane` writes register `r` to (lane and register offsets only: a warp's own offset moves
  // every lane's word alike and leaves the banks' counts as they are; in the shared format, as long as it moves
  // the rows by whole swizzle periods, as a warpgroup's warps do).
  int64_t word(int lane, int r) const {
    const Coord e = L.element(r, lane);
    const int64_t row = along(e, row_dim), col = along(e, col_dim);
    if (format)
      return format->chunk_offset(row, col / 4) / 4 + col % 4;
    return row * row_stride + col;
  }

  // The lanes that write: a lane bit whose basis is all zero replicates the tile, and only the lanes with it clear
  // write (Emitter::owner_predicate).
  bool writes(int lane) const {
    for (size_t b = 0; b < L.lane.size(); ++b)
      if (((lane >> b) & 1) && all_zero(L.lane[b]))
        return false;
    return true;
  }

  int64_t wavefronts(const std::vector<int>& masks) const {
    int64_t total = 0;
    for (int j = 0; j < L.num_regs(); j += vector) {
      std::map<int64_t, std::set<int64_t>> words_of_bank;
      for (int lane = 0; lane < kLanes; ++lane) {
        if (!writes(lane))
          continue;
        int rot = 0;
        for (int b = 0; b < kLaneBits; ++b)
          if ((lane >> b) & 1)
            rot ^= masks[static_cast<size_t>(b)];
        const int64_t w = word(lane, j ^ rot);
        for (int e = 0; e < vector; ++e)
          words_of_bank[((w + e) % kBanks + kBanks) % kBanks].insert(w + e);
      }
      int64_t most = 0;
      for (const auto& [bank, words] : words_of_bank)
        most = std::max<int64_t>(most, static_cast<int64_t>(words.size()));
      total += most;
    }
    return total;
  }
};

// Register bit 0 is the next column and every other basis moves the column by an even amount: registers 2i and
// 2i + 1 are one aligned 8-byte pair.
bool pairs_along_columns(const Layout& L, int row_dim, int col_dim, int64_t row_stride) {
  if (L.reg.empty() || along(L.reg[0], col_dim) != 1 || along(L.reg[0], row_dim) != 0 || row_stride % 2 != 0)
    return false;
  for (int d = 0; d < L.rank(); ++d)
    if (d != col_dim && d != row_dim && L.reg[0][static_cast<size_t>(d)] != 0)
      return false;
  auto even = [&](const std::vector<Coord>& bases, size_t from) {
    for (size_t b = from; b < bases.size(); ++b)
      if (along(bases[b], col_dim) % 2 != 0)
        return false;
    return true;
  };
  return even(L.reg, 1) && even(L.lane, 0) && even(L.warp, 0);
}

// The per-register-bit XORs and adds of StageWrites::chunk_xor / byte_add for `L` in `format`, checked against
// every lane's and warp's place of every register; nullopt where they do not give it.
std::optional<std::pair<std::vector<int64_t>, std::vector<int64_t>>>
register_bit_offsets(const Layout& L, int row_dim, int col_dim, const SharedTileGeometry& format) {
  const int64_t line_elems = format.line_bytes() / 4;
  std::vector<int64_t> x(L.reg.size(), 0), a(L.reg.size(), 0);
  for (size_t b = 0; b < L.reg.size(); ++b) {
    const int64_t row = along(L.reg[b], row_dim), col = along(L.reg[b], col_dim);
    if (row % 8 != 0 || row < 0 || col < 0 || (col % 4 != 0 && col >= 4))
      return std::nullopt;
    if (col < 4) // within a chunk: a byte offset of its own (checked below not to carry into the lane's)
      a[b] = col * 4;
    else if (col < line_elems)
      x[b] = (col / 4) * 16;
    else if (col % line_elems == 0)
      a[b] = (col / line_elems) * format.panel_bytes();
    else
      return std::nullopt;
    a[b] += row * format.line_bytes();
  }
  auto place = [&](const Coord& e) {
    const int64_t col = along(e, col_dim);
    return format.chunk_offset(along(e, row_dim), col / 4) + (col % 4) * 4;
  };
  for (int w = 0; w < (1 << L.warp.size()); ++w)
    for (int lane = 0; lane < kLanes; ++lane) {
      const int64_t base = place(L.element(0, lane, w));
      for (int r = 0; r < L.num_regs(); ++r) {
        int64_t xr = 0, ar = 0;
        for (size_t b = 0; b < L.reg.size(); ++b)
          if ((r >> b) & 1) {
            xr ^= x[b];
            ar += a[b];
          }
        if (place(L.element(r, lane, w)) != (base ^ xr) + ar)
          return std::nullopt;
      }
    }
  return std::pair{x, a};
}

} // namespace

bool StageWrites::rotated() const {
  return std::any_of(lane_masks.begin(), lane_masks.end(), [](int m) { return m != 0; });
}

std::string StageWrites::str() const {
  std::string s = vector == 2 ? "8-byte stores" : "4-byte stores";
  if (rotated()) {
    s += ", each lane's registers rotated by";
    for (size_t b = 0; b < lane_masks.size(); ++b)
      if (lane_masks[b] != 0)
        s += fmt::format(" lane bit {} (register ^ {})", b, lane_masks[b]);
  }
  if (by_register_bits())
    s += ", at the lane's offset with each register's chunk XOR and add";
  s += fmt::format(": {} shared-memory wavefronts a warp", wavefronts);
  if (rotated())
    s += fmt::format(" ({} in order)", wavefronts_plain);
  return s;
}

StageWrites plan_stage_writes(const Layout& L, int row_dim, int col_dim, int64_t row_stride, bool rotate,
                              const SharedTileGeometry* format) {
  StageWrites s;
  // In the shared format a pair of columns stays in its 16-byte chunk: pairs start at even columns.
  s.vector = pairs_along_columns(L, row_dim, col_dim, format ? 2 : row_stride) ? 2 : 1;
  s.lane_masks.assign(kLaneBits, 0);
  const WarpWrites warp{L, row_dim, col_dim, row_stride, s.vector, format};
  s.wavefronts = s.wavefronts_plain = warp.wavefronts(s.lane_masks);
  if (format && row_dim >= 0)
    if (auto offsets = register_bit_offsets(L, row_dim, col_dim, *format)) {
      s.chunk_xor = std::move(offsets->first);
      s.byte_add = std::move(offsets->second);
      return s; // no rotation: a rotated order's registers would need their places computed whole
    }
  if (!rotate)
    return s;
  // Greedy, lane bit by lane bit: the mask (over the registers' bits above the pair's) that lowers the count most,
  // none where nothing lowers it. A tile has at most a few register bits, so every mask is tried.
  const int first_bit = s.vector == 2 ? 1 : 0;
  const int masks = 1 << L.reg.size();
  for (int b = 0; b < kLaneBits && b < static_cast<int>(L.lane.size()); ++b) {
    if (all_zero(L.lane[static_cast<size_t>(b)]))
      continue;
    for (int m = 1; m < masks; ++m) {
      if (m & ((1 << first_bit) - 1))
        continue;
      std::vector<int> trial = s.lane_masks;
      trial[static_cast<size_t>(b)] = m;
      const int64_t w = warp.wavefronts(trial);
      if (w < s.wavefronts) {
        s.wavefronts = w;
        s.lane_masks = trial;
      }
    }
  }
  return s;
}

} // namespace kiln
