#include "support/half.h"

#include <cmath>
#include <cstring>

namespace kiln {

namespace {
uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
} // namespace

uint16_t float_to_f16_bits(float f) {
  uint32_t x = bits_of(f);
  uint32_t sign = (x >> 16) & 0x8000u;
  uint32_t absx = x & 0x7fffffffu;
  if (absx >= 0x7f800000u) // inf or nan
    return static_cast<uint16_t>(sign | 0x7c00u | (absx > 0x7f800000u ? 0x200u | ((absx >> 13) & 0x3ffu) : 0));
  if (absx >= 0x477ff000u) // rounds to >= 65520: overflow to inf
    return static_cast<uint16_t>(sign | 0x7c00u);
  if (absx < 0x38800000u) { // subnormal half (or zero): scale into the integer domain, round there
    float scaled = float_of(absx) * 16777216.0f; // 2^24: one unit = the smallest subnormal half
    uint32_t m = static_cast<uint32_t>(std::nearbyint(scaled));
    return static_cast<uint16_t>(sign | m);
  }
  uint32_t mant = absx & 0x7fffffu;
  uint32_t exp = (absx >> 23) - 127 + 15;
  uint32_t half = (exp << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1u)))
    ++half; // may carry into the exponent, which is the correct rounding
  return static_cast<uint16_t>(sign | half);
}

float f16_bits_to_float(uint16_t h) {
  uint32_t sign = (h & 0x8000u) << 16;
  uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f)
    return float_of(sign | 0x7f800000u | (mant << 13));
  if (exp == 0) {
    float v = std::ldexp(static_cast<float>(mant), -24);
    return sign ? -v : v;
  }
  return float_of(sign | ((exp - 15 + 127) << 23) | (mant << 13));
}

uint16_t float_to_bf16_bits(float f) {
  uint32_t x = bits_of(f);
  if ((x & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((x >> 16) | 0x40u); // quiet nan
  uint32_t rounding = 0x7fffu + ((x >> 16) & 1u);
  return static_cast<uint16_t>((x + rounding) >> 16);
}

float bf16_bits_to_float(uint16_t b) { return float_of(static_cast<uint32_t>(b) << 16); }

double round_to_dtype(double x, DType t) {
  switch (t) {
  case DType::f64: return x;
  case DType::f32: return static_cast<double>(static_cast<float>(x));
  case DType::f16: return f16_bits_to_float(float_to_f16_bits(static_cast<float>(x)));
  case DType::bf16: return bf16_bits_to_float(float_to_bf16_bits(static_cast<float>(x)));
  case DType::i1: return x != 0 ? 1 : 0;
  case DType::u8: return static_cast<double>(static_cast<uint8_t>(static_cast<int64_t>(x)));
  case DType::i32: return static_cast<double>(static_cast<int32_t>(static_cast<int64_t>(x)));
  case DType::i64: return static_cast<double>(static_cast<int64_t>(x));
  }
  return x;
}

} // namespace kiln
