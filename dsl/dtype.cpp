#include "dsl/dtype.h"

#include "support/error.h"

#include <array>
#include <cmath>
#include <limits>

namespace kiln {

namespace {
constexpr std::array<std::string_view, 8> kNames = {"i1", "u8", "i32", "i64", "f16", "bf16", "f32", "f64"};
constexpr std::array<int, 8> kBytes = {1, 1, 4, 8, 2, 2, 4, 8};
} // namespace

std::string_view dtype_name(DType t) { return kNames[static_cast<int>(t)]; }

std::optional<DType> parse_dtype(std::string_view name) {
  for (size_t i = 0; i < kNames.size(); ++i)
    if (kNames[i] == name)
      return static_cast<DType>(i);
  return std::nullopt;
}

int dtype_bytes(DType t) { return kBytes[static_cast<int>(t)]; }

int dtype_rank(DType t) {
  switch (t) {
  case DType::i1: return 0;
  case DType::u8: return 1;
  case DType::i32: return 2;
  case DType::i64: return 3;
  case DType::f16:
  case DType::bf16: return 4;
  case DType::f32: return 5;
  case DType::f64: return 6;
  }
  return 0;
}

std::pair<int64_t, int64_t> int_range(DType t) {
  switch (t) {
  case DType::i1: return {0, 1};
  case DType::u8: return {0, 255};
  case DType::i32: return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
  case DType::i64: return {std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
  default: break;
  }
  throw InternalError(fmt::format("int_range of the floating-point dtype {}", dtype_name(t)));
}

bool int_dtype_holds(DType t, double v) {
  if (!std::isfinite(v) || v != std::floor(v))
    return false;
  auto [lo, hi] = int_range(t);
  // 2^63 is exactly representable while INT64_MAX is not: compare against the bounds as doubles,
  // excluding the upper one for i64, whose double rounds up past the range.
  if (t == DType::i64)
    return v >= -9223372036854775808.0 && v < 9223372036854775808.0;
  return v >= static_cast<double>(lo) && v <= static_cast<double>(hi);
}

DType promote(DType a, DType b) {
  if (a == b)
    return a;
  if ((a == DType::f16 && b == DType::bf16) || (a == DType::bf16 && b == DType::f16))
    return DType::f32;
  return dtype_rank(a) >= dtype_rank(b) ? a : b;
}

} // namespace kiln
