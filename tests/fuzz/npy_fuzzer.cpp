// Fuzzes the .npy reader (support/npy.h) with arbitrary bytes. A malformed file must be a kiln::Error; any
// other exception, a crash or a sanitizer report is a bug. A file that parses must hold as many values as
// its shape says, and a float array must survive writing it back as f64 and reading it again unchanged.
#include "support/error.h"
#include "support/npy.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

namespace {

bool same_value(double a, double b) { return a == b || (std::isnan(a) && std::isnan(b)); }

void check_round_trip(const kiln::NpyArray& array) {
  const kiln::NpyArray again = kiln::parse_npy(kiln::serialize_npy(kiln::DType::f64, array.shape, array.values),
                                               "the f64 copy");
  if (again.shape != array.shape || again.values.size() != array.values.size())
    std::abort();
  for (size_t i = 0; i < array.values.size(); ++i)
    if (!same_value(again.values[i], array.values[i]))
      std::abort();
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  kiln::NpyArray array;
  try {
    array = kiln::parse_npy(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.npy");
  } catch (const kiln::Error&) {
    return 0; // refused, as a malformed file must be
  }
  if (array.numel() != static_cast<int64_t>(array.values.size()))
    std::abort();
  check_round_trip(array);
  return 0;
}
