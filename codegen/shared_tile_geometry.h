// Where an element of a shared operand tile lives: the one owner of kiln's shared-memory tile format, used
// by the emitter (cp.async copies, ldmatrix fragments, element reads), by the wgmma descriptors and by the
// planner's sizes.
//
// A tile is stored in 16-byte chunks, `cols` elements (the contiguous dim) by `rows`. A row of at most 128
// bytes (or of the narrower line the plan chose, line_cap) is one line; wider rows are cut into column panels of
// one line's width stored one after another (all rows of panel 0, then panel 1, ...). Within a line, chunk c of
// row r sits at c ^ phase(r): the XOR pattern of Hopper's 128/64/32-byte swizzle modes on a 1024-byte aligned
// base, so that one format serves ldmatrix without bank conflicts and wgmma's matrix descriptors alike (the
// device's kiln::swizzle_chunk).
#pragma once

#include <cstdint>
#include <string>

namespace kiln {

enum class SwizzleMode : uint8_t { None = 0, Bytes128 = 1, Bytes64 = 2, Bytes32 = 3 };
const char* swizzle_mode_name(SwizzleMode m); // "128-byte swizzle", ...

struct SharedTileGeometry {
  int64_t rows = 0, cols = 0; // cols: the contiguous dim
  int elem_bytes = 2;
  bool swizzled = true; // CodegenOptions::swizzle
  // The widest line (the swizzle width): 128 bytes, or 64 or 32 where the plan narrows it (SharedTile::line_cap).
  int64_t line_cap = 128;

  int64_t row_bytes() const { return cols * elem_bytes; }
  int64_t line_bytes() const { return row_bytes() < line_cap ? row_bytes() : line_cap; }
  int64_t chunks_per_line() const { return line_bytes() / 16; }
  bool panelled() const { return row_bytes() > line_bytes(); }
  int64_t panel_bytes() const { return rows * line_bytes(); } // between panels, when panelled
  // The descriptor's swizzle mode for this line width (the tile is swizzled the same way whatever wgmma
  // does).
  SwizzleMode swizzle_mode() const;

  // The physical chunk within its line of logical chunk `chunk` (< chunks_per_line) of row `row`; the host
  // copy of the prelude's kiln::swizzle_chunk.
  int64_t physical_chunk(int64_t row, int64_t chunk) const;
  // Byte offset within one stage of 16-byte chunk `chunk` (of the whole row) of row `row`: as a number, and
  // as the CUDA expression the emitter prints for run-time row and chunk expressions.
  int64_t chunk_offset(int64_t row, int64_t chunk) const;
  std::string chunk_offset_expr(const std::string& row, const std::string& chunk) const;
};

} // namespace kiln
