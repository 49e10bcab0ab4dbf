// The shared tile format (codegen/shared_tile_geometry.h): every chunk has one place, ldmatrix's eight rows
// at one logical chunk hit eight distinct bank groups, and the XOR phases are Hopper's 128/64/32-byte
// swizzle modes, which the wgmma descriptors name.
#include "codegen/shared_tile_geometry.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

using namespace kiln;

namespace {

std::vector<SharedTileGeometry> tiles() {
  std::vector<SharedTileGeometry> out;
  for (int64_t cols : {16, 32, 64, 128, 256})
    for (int eb : {2, 4})
      for (int64_t rows : {8, 64, 128})
        for (int64_t line_cap : {128, 64, 32}) // the lines choose_dot_lowering narrows too
          out.push_back(SharedTileGeometry{rows, cols, eb, true, line_cap});
  return out;
}

TEST(SharedTileGeometry, EveryChunkHasItsOwnPlaceInsideTheStage) {
  for (const SharedTileGeometry& g : tiles()) {
    std::set<int64_t> seen;
    const int64_t chunks = g.row_bytes() / 16;
    for (int64_t r = 0; r < g.rows; ++r)
      for (int64_t c = 0; c < chunks; ++c) {
        const int64_t off = g.chunk_offset(r, c);
        EXPECT_EQ(off % 16, 0);
        EXPECT_GE(off, 0);
        EXPECT_LT(off, g.rows * g.row_bytes());
        EXPECT_TRUE(seen.insert(off).second) << g.rows << "x" << g.cols << " row " << r << " chunk " << c;
      }
  }
}

TEST(SharedTileGeometry, EightRowsAtOneChunkHitEightBankGroups) {
  // ldmatrix: 8 lanes read 8 consecutive rows at the same logical chunk; shared memory serves 128 bytes
  // (8 chunks) a wavefront, so the 8 chunks must sit at distinct positions modulo 8.
  for (const SharedTileGeometry& g : tiles()) {
    if (g.row_bytes() < 32) // a 16-byte row is one chunk: eight rows are eight consecutive chunks already
      continue;
    for (int64_t r0 = 0; r0 + 8 <= g.rows; r0 += 8)
      for (int64_t c = 0; c < g.row_bytes() / 16; ++c) {
        std::set<int64_t> banks;
        for (int64_t i = 0; i < 8; ++i)
          banks.insert((g.chunk_offset(r0 + i, c) / 16) % 8);
        EXPECT_EQ(banks.size(), 8u) << g.rows << "x" << g.cols << "x" << g.elem_bytes << "B chunk " << c;
      }
  }
}

TEST(SharedTileGeometry, PhasesAreHoppersSwizzleModes) {
  // 128-byte lines: chunk ^ (row % 8); 64-byte: chunk ^ ((row / 2) % 4); 32-byte: chunk ^ ((row / 4) % 2).
  for (auto [cols, mode, rows_per_phase, phases] : {std::tuple{64, SwizzleMode::Bytes128, 1, 8},
                                                    {32, SwizzleMode::Bytes64, 2, 4},
                                                    {16, SwizzleMode::Bytes32, 4, 2}}) {
    SharedTileGeometry g{64, cols, 2, true};
    EXPECT_EQ(g.swizzle_mode(), mode);
    for (int64_t r = 0; r < 64; ++r)
      for (int64_t c = 0; c < g.chunks_per_line(); ++c)
        EXPECT_EQ(g.physical_chunk(r, c), c ^ ((r / rows_per_phase) % phases)) << swizzle_mode_name(mode);
  }
  SharedTileGeometry unswizzled{64, 64, 2, false};
  EXPECT_EQ(unswizzled.physical_chunk(5, 3), 3);
}

TEST(SharedTileGeometry, WideRowsAreCutIntoPanels) {
  SharedTileGeometry g{64, 128, 2, true}; // 256-byte rows: two 128-byte panels of 64 rows
  EXPECT_TRUE(g.panelled());
  EXPECT_EQ(g.panel_bytes(), 64 * 128);
  EXPECT_EQ(g.chunk_offset(0, 8), 64 * 128) << "chunk 8 starts panel 1";
  EXPECT_EQ(g.chunk_offset(3, 9), 64 * 128 + 3 * 128 + (1 ^ 3) * 16);
  // The expression the emitter prints computes the same thing at run time.
  EXPECT_EQ(g.chunk_offset_expr("row", "c"),
            "((c) / 8) * 8192 + (row) * 128 + kiln::swizzle_chunk<8>(row, ((c) % 8)) * 16");
  EXPECT_EQ((SharedTileGeometry{64, 32, 2, true}.chunk_offset_expr("r", "c")),
            "(r) * 64 + kiln::swizzle_chunk<4>(r, c) * 16");
}

// Narrowed lines (SharedTile::line_cap): a 128-byte row in two 64-byte panels, each laid out as the TMA unit's and
// wgmma's 64-byte swizzle places it. The swizzle as the hardware defines it on a 1024-byte aligned base: the 16-byte
// chunk bits [4, 6) (64-byte) or [4, 7) (128-byte) of the byte address XOR the bits just above a 128-byte line,
// [7, 9) or [7, 10) (CUTLASS's Swizzle<2,4,3> and <3,4,3>), computed here from the address, not from kiln's phases.
TEST(SharedTileGeometry, NarrowedLinesArePanelsInTheHardwaresSwizzle) {
  auto hardware = [](int64_t address, int64_t line_bytes) {
    const int64_t bits = line_bytes == 128 ? 7 : line_bytes == 64 ? 3 : 1;
    return address ^ (((address >> 7) & bits) << 4);
  };
  for (int64_t line_cap : {128, 64, 32})
    for (int64_t cols : {64, 128}) {
      const SharedTileGeometry g{128, cols, 2, true, line_cap};
      const int64_t line = std::min(g.row_bytes(), line_cap);
      ASSERT_EQ(g.line_bytes(), line);
      EXPECT_EQ(g.panel_bytes(), 128 * line);
      EXPECT_EQ(g.panelled(), g.row_bytes() > line);
      EXPECT_EQ(g.swizzle_mode(), line == 128  ? SwizzleMode::Bytes128
                                  : line == 64 ? SwizzleMode::Bytes64
                                               : SwizzleMode::Bytes32);
      const int64_t per_line = line / 16;
      for (int64_t r = 0; r < g.rows; ++r)
        for (int64_t c = 0; c < g.row_bytes() / 16; ++c) {
          const int64_t panel = c / per_line, in_panel = r * line + (c % per_line) * 16;
          EXPECT_EQ(g.chunk_offset(r, c), panel * g.panel_bytes() + hardware(in_panel, line))
              << "cap " << line_cap << " cols " << cols << " row " << r << " chunk " << c;
        }
    }
  // D = 64 f16 in 64-byte lines: what the emitter prints.
  EXPECT_EQ((SharedTileGeometry{128, 64, 2, true, 64}.chunk_offset_expr("r", "c")),
            "((c) / 4) * 8192 + (r) * 64 + kiln::swizzle_chunk<4>(r, ((c) % 4)) * 16");
}

} // namespace
