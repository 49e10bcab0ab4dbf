#include "analysis/interval.h"

#include "dsl/scalar_eval.h"

#include <cstdlib>

namespace kiln {

namespace {

// a op b for every corner of the two intervals, for an op monotone in each operand on them (+, -, *, and /
// by a divisor of one sign); unknown when any corner wraps in the dtype `t`.
Interval corners(BinaryOp op, const Interval& a, const Interval& b, DType t) {
  if (!a.known || !b.known)
    return Interval::unknown();
  int64_t lo = 0, hi = 0;
  bool first = true;
  for (int64_t x : {a.lo, a.hi})
    for (int64_t y : {b.lo, b.hi}) {
      std::optional<int64_t> v = exact_int_op(op, x, y, t);
      if (!v)
        return Interval::unknown();
      lo = first ? *v : std::min(lo, *v);
      hi = first ? *v : std::max(hi, *v);
      first = false;
    }
  return Interval::of(lo, hi);
}

// C remainder (the sign of the dividend, smaller than the divisor): a bound, not the rule at the endpoints,
// since a % b is not monotone.
Interval remainder(const Interval& a, const Interval& b) {
  if (!a.known || !b.known || (b.lo <= 0 && b.hi >= 0) || b.lo == INT64_MIN)
    return Interval::unknown();
  const int64_t m = std::max(std::abs(b.lo), std::abs(b.hi)) - 1; // |a % b| <= |b| - 1, sign of a
  if (a.lo >= 0)
    return Interval::of(0, std::min(a.hi, m));
  if (a.hi <= 0)
    return Interval::of(std::max(a.lo, -m), 0);
  return Interval::of(std::max(a.lo, -m), std::min(a.hi, m));
}

} // namespace

Interval hull(const Interval& a, const Interval& b) {
  if (!a.known || !b.known)
    return Interval::unknown();
  return Interval::of(std::min(a.lo, b.lo), std::max(a.hi, b.hi));
}

std::optional<int64_t> exact_int_op(BinaryOp op, int64_t x, int64_t y, DType t) {
  const IntResult r = int_binary(op, x, y, t);
  return r.wrapped ? std::nullopt : std::optional<int64_t>(r.value);
}

Interval interval_binary(BinaryOp op, const Interval& a, const Interval& b, DType t) {
  if (is_comparison(op))
    return Interval::of(0, 1);
  if (!a.known || !b.known)
    return Interval::unknown();
  switch (op) {
  case BinaryOp::Add:
  case BinaryOp::Sub:
  case BinaryOp::Mul:
    return corners(op, a, b, t);
  case BinaryOp::Div: // monotone once the divisor keeps one sign
    return b.lo <= 0 && b.hi >= 0 ? Interval::unknown() : corners(op, a, b, t);
  case BinaryOp::Rem:
    return remainder(a, b);
  case BinaryOp::Min:
  case BinaryOp::Max: // monotone in both operands: the low ends give the low end, the high ends the high end
    return Interval::of(int_binary(op, a.lo, b.lo, t).value, int_binary(op, a.hi, b.hi, t).value);
  case BinaryOp::And:
  case BinaryOp::Or: // non-negative operands: a & b <= min(a, b), a | b <= a + b
    if (a.lo < 0 || b.lo < 0)
      return Interval::unknown();
    return op == BinaryOp::And ? Interval::of(0, std::min(a.hi, b.hi)) : corners(BinaryOp::Add, a, b, t);
  default:
    return Interval::unknown();
  }
}

Interval interval_unary(UnaryOp op, const Interval& x, DType t) {
  if (op == UnaryOp::Not)
    return Interval::of(0, 1);
  if (!x.known || (op != UnaryOp::Neg && op != UnaryOp::Abs))
    return Interval::unknown();
  const IntResult at_lo = int_unary(op, x.lo, t), at_hi = int_unary(op, x.hi, t);
  if (at_lo.wrapped || at_hi.wrapped)
    return Interval::unknown();
  if (op == UnaryOp::Abs && x.lo < 0 && x.hi > 0) // spans 0, where |x| is least
    return Interval::of(0, std::max(at_lo.value, at_hi.value));
  return Interval::of(at_lo.value, at_hi.value);
}

Interval interval_cast(const Interval& x, DType to) {
  if (to == DType::i1)
    return Interval::of(0, 1);
  if (!x.known)
    return Interval::unknown();
  const IntResult lo = cast_int(x.lo, to), hi = cast_int(x.hi, to);
  return lo.wrapped || hi.wrapped ? Interval::unknown() : Interval::of(lo.value, hi.value);
}

} // namespace kiln
