// The scalar rules of kiln's IR, in one place: what one element of an arithmetic op, a comparison, a cast, a
// select or a constant computes, for every dtype. The interpreter applies them to every element of a tile,
// the performance model evaluates a program's scalars with them and the launch plan's interval analysis
// evaluates the endpoints of its intervals with them, so that the three agree by construction. The rules (the
// generated code follows them too; see the comment above `interpret` in dsl/interpreter.h):
// - integers are exact in int64 (i1 as 0/1), and every result wraps to its dtype's width, two's complement;
// - integer / and % truncate like C (MIN / -1 wraps to MIN, MIN % -1 is 0); a zero divisor is a kiln::Error;
// - a float op computes in double and rounds once to its dtype (for +, -, *, / of f32/f16/bf16 operands the
//   double result is exact, so the one rounding gives the correctly rounded result the GPU computes);
// - min and max ignore a NaN operand unless both are NaN (CUDA's fminf/fmaxf); a comparison with NaN is
//   false, except !=, which is true;
// - float -> int truncates toward zero to i64 (saturating at i64's range, NaN giving 0, as PTX's cvt.rzi.s64
//   does), then wraps to the width; anything -> i1 is `x != 0` (so NaN gives 1, as in C++); int -> f32/f64
//   rounds once from the integer, int -> f16/bf16 rounds through f32.
//
// Two layers. The element rules choose the op once and hand the caller a function for one element
// (with_int_binary and friends), so that a loop over a tile runs the rule inline; ScalarValue and eval_*
// build on them for the analyses, which evaluate one scalar at a time.
#pragma once

#include "dsl/dtype.h"
#include "dsl/ir.h"
#include "support/error.h"
#include "support/half.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>

namespace kiln {

// ---- conversions ----

// An integer wrapped to the width of the integer dtype `t` (i1 is `v != 0`).
inline int64_t wrap_to_width(uint64_t v, DType t) {
  switch (t) {
  case DType::i1:
    return v != 0;
  case DType::u8:
    return static_cast<uint8_t>(v);
  case DType::i32:
    return static_cast<int32_t>(v);
  default:
    return static_cast<int64_t>(v);
  }
}

// Whether the integer dtype `t` holds `v` as it is (wrapping leaves it unchanged).
inline bool int_fits(int64_t v, DType t) { return wrap_to_width(static_cast<uint64_t>(v), t) == v; }

// Float to the integer dtype `t`, the rule the device prelude's cvt<> implements (see above).
int64_t float_to_int(double x, DType t);
// Integer to the float dtype `t`.
double int_to_float(int64_t v, DType t);

// Calls apply(round) with round(x) = x rounded to the float dtype `t`, the dtype chosen once.
template <typename Apply> decltype(auto) with_float_rounding(DType t, Apply&& apply) {
  switch (t) {
  case DType::f64:
    return apply([](double x) { return x; });
  case DType::f32:
    return apply([](double x) { return static_cast<double>(static_cast<float>(x)); });
  default:
    return apply([t](double x) { return round_to_dtype(x, t); });
  }
}

// `x` rounded to the float dtype `t`.
inline double round_to_float(double x, DType t) {
  return with_float_rounding(t, [x](auto round) { return round(x); });
}

// ---- element rules ----

// An integer result: the value, wrapped to its dtype, and whether wrapping changed it (the exact result does
// not fit the dtype). The interpreter reads only the value; an interval analysis needs to know that an
// endpoint wrapped, since the values between two wrapped endpoints are not an interval.
struct IntResult {
  int64_t value = 0;
  bool wrapped = false;
};

namespace scalar_detail {
inline uint64_t bits(int64_t v) { return static_cast<uint64_t>(v); }
// The wrapped result of an op whose exact result is `exact`, or which overflowed int64 (`overflow`, with
// `modular` the result modulo 2^64).
inline IntResult wrapped_result(uint64_t modular, bool overflow, DType t) {
  const int64_t v = wrap_to_width(modular, t);
  return {v, overflow || bits(v) != modular};
}
[[noreturn]] void division_by_zero(BinaryOp op, int64_t dividend);
} // namespace scalar_detail

// Whether `op` on a divisor `y` divides an integer by zero, which the rules make an Error.
inline bool divides_by_zero(BinaryOp op, int64_t y) {
  return (op == BinaryOp::Div || op == BinaryOp::Rem) && y == 0;
}

// Calls apply(fn) with fn(x, y) -> IntResult computing `op` on two integers of dtype `t` (comparisons give
// 0 or 1, And/Or are bitwise, which on i1 is logical). A zero divisor is a kiln::Error from fn; a caller that
// wants to name the lane checks divides_by_zero first.
template <typename Apply> decltype(auto) with_int_binary(BinaryOp op, DType t, Apply&& apply) {
  using scalar_detail::bits;
  using scalar_detail::wrapped_result;
  auto exact = [t](int64_t v) { return IntResult{wrap_to_width(bits(v), t), !int_fits(v, t)}; };
  auto flag = [](bool b) { return IntResult{b, false}; };
  switch (op) {
  case BinaryOp::Add:
    return apply([t](int64_t x, int64_t y) {
      int64_t r;
      return wrapped_result(bits(x) + bits(y), __builtin_add_overflow(x, y, &r), t);
    });
  case BinaryOp::Sub:
    return apply([t](int64_t x, int64_t y) {
      int64_t r;
      return wrapped_result(bits(x) - bits(y), __builtin_sub_overflow(x, y, &r), t);
    });
  case BinaryOp::Mul:
    return apply([t](int64_t x, int64_t y) {
      int64_t r;
      return wrapped_result(bits(x) * bits(y), __builtin_mul_overflow(x, y, &r), t);
    });
  case BinaryOp::Div: // truncates toward zero; MIN / -1 is -MIN, which wraps
    return apply([t, exact](int64_t x, int64_t y) {
      if (y == 0)
        scalar_detail::division_by_zero(BinaryOp::Div, x);
      if (y == -1)
        return wrapped_result(0 - bits(x), x == std::numeric_limits<int64_t>::min(), t);
      return exact(x / y);
    });
  case BinaryOp::Rem: // takes the sign of the dividend; x % -1 is 0 (MIN % -1 too, which C leaves undefined)
    return apply([exact](int64_t x, int64_t y) {
      if (y == 0)
        scalar_detail::division_by_zero(BinaryOp::Rem, x);
      return exact(y == -1 ? 0 : x % y);
    });
  case BinaryOp::Min:
    return apply([exact](int64_t x, int64_t y) { return exact(std::min(x, y)); });
  case BinaryOp::Max:
    return apply([exact](int64_t x, int64_t y) { return exact(std::max(x, y)); });
  case BinaryOp::And:
    return apply([exact](int64_t x, int64_t y) { return exact(x & y); });
  case BinaryOp::Or:
    return apply([exact](int64_t x, int64_t y) { return exact(x | y); });
  case BinaryOp::Eq:
    return apply([flag](int64_t x, int64_t y) { return flag(x == y); });
  case BinaryOp::Ne:
    return apply([flag](int64_t x, int64_t y) { return flag(x != y); });
  case BinaryOp::Lt:
    return apply([flag](int64_t x, int64_t y) { return flag(x < y); });
  case BinaryOp::Le:
    return apply([flag](int64_t x, int64_t y) { return flag(x <= y); });
  case BinaryOp::Gt:
    return apply([flag](int64_t x, int64_t y) { return flag(x > y); });
  case BinaryOp::Ge:
    return apply([flag](int64_t x, int64_t y) { return flag(x >= y); });
  case BinaryOp::Pow: // float only (the verifier rejects integers)
    break;
  }
  throw InternalError(fmt::format("{} on integers", binary_name(op)));
}

// Calls apply(fn) with fn(x) -> IntResult computing `op` on an integer of dtype `t`: Not (on i1) is `x == 0`,
// Neg and Abs wrap (-MIN is MIN). The float-only ops are an InternalError (the verifier rejects them).
template <typename Apply> decltype(auto) with_int_unary(UnaryOp op, DType t, Apply&& apply) {
  using scalar_detail::bits;
  using scalar_detail::wrapped_result;
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  switch (op) {
  case UnaryOp::Not:
    return apply([](int64_t x) { return IntResult{x == 0, false}; });
  case UnaryOp::Neg:
    return apply([t](int64_t x) { return wrapped_result(0 - bits(x), x == kMin, t); });
  case UnaryOp::Abs:
    return apply([t](int64_t x) {
      return x < 0 ? wrapped_result(0 - bits(x), x == kMin, t) : wrapped_result(bits(x), false, t);
    });
  default:
    break;
  }
  throw InternalError(fmt::format("{} on integers", unary_name(op)));
}

// Calls apply(fn) with fn(x, y) -> double computing the arithmetic `op` (not a comparison) on two floats and
// rounding the result to the float dtype `t`. And/Or are an InternalError (the verifier rejects them).
template <typename Apply> decltype(auto) with_float_binary(BinaryOp op, DType t, Apply&& apply) {
  return with_float_rounding(t, [&](auto round) -> decltype(auto) {
    switch (op) {
    case BinaryOp::Add:
      return apply([round](double x, double y) { return round(x + y); });
    case BinaryOp::Sub:
      return apply([round](double x, double y) { return round(x - y); });
    case BinaryOp::Mul:
      return apply([round](double x, double y) { return round(x * y); });
    case BinaryOp::Div:
      return apply([round](double x, double y) { return round(x / y); });
    case BinaryOp::Rem:
      return apply([round](double x, double y) { return round(std::fmod(x, y)); });
    case BinaryOp::Min: // NaN only when both are
      return apply([round](double x, double y) { return round(std::fmin(x, y)); });
    case BinaryOp::Max:
      return apply([round](double x, double y) { return round(std::fmax(x, y)); });
    case BinaryOp::Pow: // C's pow: pow(x, 0) is 1 even for NaN x, a negative x with a non-integer y is NaN
      return apply([round](double x, double y) { return round(std::pow(x, y)); });
    default:
      break;
    }
    throw InternalError(fmt::format("{} on floats", binary_name(op)));
  });
}

// Calls apply(fn) with fn(x, y) -> int64_t (0 or 1) comparing two floats by the comparison `op`.
template <typename Apply> decltype(auto) with_float_comparison(BinaryOp op, Apply&& apply) {
  switch (op) {
  case BinaryOp::Eq:
    return apply([](double x, double y) -> int64_t { return x == y; });
  case BinaryOp::Ne:
    return apply([](double x, double y) -> int64_t { return x != y; });
  case BinaryOp::Lt:
    return apply([](double x, double y) -> int64_t { return x < y; });
  case BinaryOp::Le:
    return apply([](double x, double y) -> int64_t { return x <= y; });
  case BinaryOp::Gt:
    return apply([](double x, double y) -> int64_t { return x > y; });
  case BinaryOp::Ge:
    return apply([](double x, double y) -> int64_t { return x >= y; });
  default:
    break;
  }
  throw InternalError(fmt::format("{} is not a comparison", binary_name(op)));
}

// Calls apply(fn) with fn(x) -> double computing `op` on a float in double and rounding it to the float dtype
// `t`. Not is an InternalError (the verifier takes it on i1 only).
template <typename Apply> decltype(auto) with_float_unary(UnaryOp op, DType t, Apply&& apply) {
  return with_float_rounding(t, [&](auto round) -> decltype(auto) {
    switch (op) {
    case UnaryOp::Neg:
      return apply([round](double x) { return round(-x); });
    case UnaryOp::Abs:
      return apply([round](double x) { return round(std::fabs(x)); });
    case UnaryOp::Exp:
      return apply([round](double x) { return round(std::exp(x)); });
    case UnaryOp::Exp2:
      return apply([round](double x) { return round(std::exp2(x)); });
    case UnaryOp::Log:
      return apply([round](double x) { return round(std::log(x)); });
    case UnaryOp::Log2:
      return apply([round](double x) { return round(std::log2(x)); });
    case UnaryOp::Sqrt:
      return apply([round](double x) { return round(std::sqrt(x)); });
    case UnaryOp::Rsqrt:
      return apply([round](double x) { return round(1.0 / std::sqrt(x)); });
    case UnaryOp::Tanh:
      return apply([round](double x) { return round(std::tanh(x)); });
    case UnaryOp::Sigmoid: // e = exp(-|x|) is in (0, 1], so neither branch overflows
      return apply([round](double x) {
        const double e = std::exp(-std::fabs(x));
        return round(x >= 0 ? 1.0 / (1.0 + e) : e / (1.0 + e));
      });
    case UnaryOp::Erf:
      return apply([round](double x) { return round(std::erf(x)); });
    case UnaryOp::Sin:
      return apply([round](double x) { return round(std::sin(x)); });
    case UnaryOp::Cos:
      return apply([round](double x) { return round(std::cos(x)); });
    case UnaryOp::Log1p:
      return apply([round](double x) { return round(std::log1p(x)); });
    case UnaryOp::Expm1:
      return apply([round](double x) { return round(std::expm1(x)); });
    case UnaryOp::Not:
      break;
    }
    throw InternalError(fmt::format("{} on floats", unary_name(op)));
  });
}

// fma(a, b, c) of the float dtype `t`: a * b + c with one rounding in f32 (fmaf: f32, and f16/bf16, whose
// operands are exact in f32 and whose f32 result then rounds to the dtype, as the generated code computes it)
// or in f64. Not computed in double for f32: a double fma rounded to f32 may differ from fmaf in the last bit.
inline double fma_element(double a, double b, double c, DType t) {
  if (t == DType::f64)
    return std::fma(a, b, c);
  const float f = std::fma(static_cast<float>(a), static_cast<float>(b), static_cast<float>(c));
  return round_to_float(static_cast<double>(f), t);
}

// One element of the rules above, for a caller that evaluates one scalar (the op chosen per call).
inline IntResult int_binary(BinaryOp op, int64_t x, int64_t y, DType t) {
  return with_int_binary(op, t, [&](auto fn) { return fn(x, y); });
}
inline IntResult int_unary(UnaryOp op, int64_t x, DType t) {
  return with_int_unary(op, t, [&](auto fn) { return fn(x); });
}

// The integer `x` (of any integer dtype) converted to the integer dtype `to`, and whether that wrapped it.
inline IntResult cast_int(int64_t x, DType to) {
  return {wrap_to_width(scalar_detail::bits(x), to), !int_fits(x, to)};
}

// ---- single scalars ----

// One scalar of an IR dtype: an integer (i1 as 0/1) exactly in `i`, a float in `f`, rounded to the dtype.
struct ScalarValue {
  DType dtype = DType::i32;
  int64_t i = 0;
  double f = 0;

  static ScalarValue of_int(int64_t v, DType t);  // integer dtypes; wrapped to the width
  static ScalarValue of_float(double v, DType t); // float dtypes; rounded to the dtype
  // `v` converted to `t` as a cast from f64 does (so an integer dtype truncates, saturates and wraps).
  static ScalarValue of_double(double v, DType t);
  double as_double() const { return is_float(dtype) ? f : static_cast<double>(i); }
  bool is_true() const { return is_float(dtype) ? f != 0 : i != 0; }
};

// `op` on one scalar; the result has x's dtype.
ScalarValue eval_unary(UnaryOp op, const ScalarValue& x);
// `op` on two scalars of one dtype (an InternalError otherwise); a comparison gives i1, anything else the
// operands' dtype. An integer zero divisor is a kiln::Error (check divides_by_zero to avoid it).
ScalarValue eval_binary(BinaryOp op, const ScalarValue& a, const ScalarValue& b);
// `x` converted to the dtype `to`.
ScalarValue eval_cast(const ScalarValue& x, DType to);
// where(cond, a, b) on scalars: a when cond is nonzero.
inline const ScalarValue& eval_where(const ScalarValue& cond, const ScalarValue& a, const ScalarValue& b) {
  return cond.is_true() ? a : b;
}
// The value of a Constant op whose result has the element dtype `t`: an exact integer as given (wrapped),
// any other value converted as a cast from f64.
ScalarValue eval_constant(const Op& op, DType t);

} // namespace kiln
