#include "codegen/stage_write_banks.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
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

  // The f32 word lane `lane` writes register `r` to (lane and register offsets only: a warp's own offset moves
  // every lane's word alike and leaves the banks' counts as they are).
  int64_t word(int lane, int r) const {
    const Coord e = L.element(r, lane);
    return along(e, row_dim) * row_stride + along(e, col_dim);
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
  s += fmt::format(": {} shared-memory wavefronts a warp", wavefronts);
  if (rotated())
    s += fmt::format(" ({} in order)", wavefronts_plain);
  return s;
}

StageWrites plan_stage_writes(const Layout& L, int row_dim, int col_dim, int64_t row_stride, bool rotate) {
  StageWrites s;
  s.vector = pairs_along_columns(L, row_dim, col_dim, row_stride) ? 2 : 1;
  s.lane_masks.assign(kLaneBits, 0);
  const WarpWrites warp{L, row_dim, col_dim, row_stride, s.vector};
  s.wavefronts = s.wavefronts_plain = warp.wavefronts(s.lane_masks);
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
