#include "codegen/shared_tile_geometry.h"

#include <fmt/format.h>

namespace kiln {

const char* swizzle_mode_name(SwizzleMode m) {
  switch (m) {
  case SwizzleMode::Bytes128:
    return "128-byte swizzle";
  case SwizzleMode::Bytes64:
    return "64-byte swizzle";
  case SwizzleMode::Bytes32:
    return "32-byte swizzle";
  case SwizzleMode::None:
    break;
  }
  return "no swizzle";
}

SwizzleMode SharedTileGeometry::swizzle_mode() const {
  switch (line_bytes()) {
  case 128:
    return SwizzleMode::Bytes128;
  case 64:
    return SwizzleMode::Bytes64;
  case 32:
    return SwizzleMode::Bytes32;
  default:
    return SwizzleMode::None;
  }
}

int64_t SharedTileGeometry::physical_chunk(int64_t row, int64_t chunk) const {
  const int64_t cpl = chunks_per_line();
  if (!swizzled || cpl <= 1)
    return chunk;
  const int64_t rows_per_phase = cpl >= 8 ? 1 : 8 / cpl;
  const int64_t phases = cpl < 8 ? cpl : 8;
  return chunk ^ ((row / rows_per_phase) % phases);
}

int64_t SharedTileGeometry::chunk_offset(int64_t row, int64_t chunk) const {
  if (!panelled())
    return row * line_bytes() + physical_chunk(row, chunk) * 16;
  const int64_t cpl = chunks_per_line();
  return (chunk / cpl) * panel_bytes() + row * line_bytes() + physical_chunk(row, chunk % cpl) * 16;
}

std::string SharedTileGeometry::chunk_offset_expr(const std::string& row, const std::string& chunk) const {
  auto swizzle = [&](const std::string& c) {
    const int64_t cpl = chunks_per_line();
    if (!swizzled || cpl <= 1)
      return c;
    return fmt::format("kiln::swizzle_chunk<{}>({}, {})", cpl, row, c);
  };
  if (!panelled())
    return fmt::format("({}) * {} + {} * 16", row, line_bytes(), swizzle(chunk));
  const int64_t cpl = chunks_per_line();
  return fmt::format("(({}) / {}) * {} + ({}) * {} + {} * 16", chunk, cpl, panel_bytes(), row, line_bytes(),
                     swizzle(fmt::format("(({}) % {})", chunk, cpl)));
}

} // namespace kiln
