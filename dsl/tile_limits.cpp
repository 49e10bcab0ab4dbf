#include "dsl/tile_limits.h"

#include <fmt/format.h>

namespace kiln {

std::string why_tile_too_large(const Type& t) {
  // Too large where a dimension or a running product passes the limit (a zero later does not make it small), or
  // the count overflows.
  int64_t n = 1;
  bool overflow = false, past = false;
  for (int64_t d : t.shape) {
    overflow = overflow || __builtin_mul_overflow(n, d, &n);
    past = past || overflow || d > kMaxTileElements || n > kMaxTileElements;
  }
  if (!past)
    return "";
  return fmt::format("a tile of shape {} ({}): {}, where a tile holds at most {} (2^20, as a Triton tensor does); "
                     "use smaller tiles and loop over the rest",
                     shape_str(t.shape), t.str(),
                     overflow ? std::string("more elements than an int64 counts") : fmt::format("{} elements", n),
                     kMaxTileElements);
}

} // namespace kiln
