// Element types of kiln tiles and pointers.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <utility>

namespace kiln {

enum class DType : uint8_t { i1, u8, i32, i64, f16, bf16, f32, f64 };

std::string_view dtype_name(DType t);                    // "f16"
std::optional<DType> parse_dtype(std::string_view name); // "f16" -> DType::f16
int dtype_bytes(DType t);                                // i1 -> 1
inline bool is_float(DType t) { return t >= DType::f16; }
inline bool is_int(DType t) { return t <= DType::i64; } // i1 and u8 count as integers
inline bool is_half(DType t) { return t == DType::f16 || t == DType::bf16; } // the 16-bit floats
int dtype_rank(DType t);                                 // promotion order: i1 < u8 < i32 < i64 < f16,bf16 < f32 < f64

// The smallest and largest value an integer dtype holds (i1: 0 and 1). InternalError for floats.
std::pair<int64_t, int64_t> int_range(DType t);
// Whether the integer dtype `t` holds `v` exactly: finite, integral and within int_range(t).
bool int_dtype_holds(DType t, double v);

// Result type of a binary op on two operand types (Triton's rules: float beats int, wider beats
// narrower, f16 with bf16 gives f32).
DType promote(DType a, DType b);

inline constexpr DType i1 = DType::i1, u8 = DType::u8, i32 = DType::i32, i64 = DType::i64, f16 = DType::f16,
                       bf16 = DType::bf16, f32 = DType::f32, f64 = DType::f64;

} // namespace kiln
