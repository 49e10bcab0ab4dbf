#include "dsl/tile_limits.h"

#include <fmt/format.h>

namespace kiln {

int64_t tile_elements_capped(const Type& t) {
  int64_t n = 1;
  for (int64_t d : t.shape) {
    if (d > kMaxTileElements || n > kMaxTileElements / (d > 0 ? d : 1))
      return kMaxTileElements + 1;
    n *= d;
  }
  return n;
}

std::string why_tile_too_large(const Type& t) {
  if (tile_elements_capped(t) <= kMaxTileElements)
    return "";
  int64_t n = 1;
  bool overflow = false;
  for (int64_t d : t.shape)
    overflow = overflow || __builtin_mul_overflow(n, d, &n);
  return fmt::format("a tile of shape {} ({}): {}, where a tile holds at most {} (2^20, as a Triton tensor does); "
                     "use smaller tiles and loop over the rest",
                     shape_str(t.shape), t.str(),
                     overflow ? std::string("more elements than an int64 counts") : fmt::format("{} elements", n),
                     kMaxTileElements);
}

} // namespace kiln
