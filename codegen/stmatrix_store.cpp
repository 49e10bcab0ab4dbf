#include "codegen/stmatrix_store.h"

#include <fmt/format.h>

namespace kiln {

std::string StmatrixStore::str() const {
  return fmt::format("{} stmatrix.x{}{} a thread", instructions, matrices, trans ? ".trans" : "");
}

std::optional<StmatrixStore> stmatrix_store(const Layout& L, int elem_bytes) {
  if (elem_bytes != 2 || L.rank() != 2 || L.reg.empty() || L.lane.size() != 5)
    return std::nullopt;
  auto is = [](const Coord& c, int64_t row, int64_t col) { return c[0] == row && c[1] == col; };
  // A fragment's register bit 0 and lane bits 0, 1 step along the matrix's row (elements 2(l%4), +1), lane bits
  // 2-4 down its rows. As stored: along the tile's columns (plain) or down its rows (.trans).
  const bool plain = is(L.reg[0], 0, 1) && is(L.lane[0], 0, 2) && is(L.lane[1], 0, 4) && is(L.lane[2], 1, 0) &&
                     is(L.lane[3], 2, 0) && is(L.lane[4], 4, 0);
  const bool trans = is(L.reg[0], 1, 0) && is(L.lane[0], 2, 0) && is(L.lane[1], 4, 0) && is(L.lane[2], 0, 1) &&
                     is(L.lane[3], 0, 2) && is(L.lane[4], 0, 4);
  if (!plain && !trans)
    return std::nullopt;
  auto whole_matrices = [](const Coord& c) { return c[0] % 8 == 0 && c[1] % 8 == 0; };
  for (size_t b = 1; b < L.reg.size(); ++b)
    if (!whole_matrices(L.reg[b]))
      return std::nullopt;
  for (const Coord& c : L.warp)
    if (!whole_matrices(c))
      return std::nullopt;
  StmatrixStore s;
  s.trans = trans;
  const int pairs = L.num_regs() / 2;
  s.matrices = pairs >= 4 ? 4 : pairs;
  s.instructions = pairs / s.matrices;
  return s;
}

} // namespace kiln
