// Integer intervals for the launch plan's address analysis (analysis/address_analysis.h): a closed range
// [lo, hi] or unknown (any value), and the IR's integer ops over intervals. Each op is evaluated at the
// intervals' endpoints by the interpreter's scalar rules (dsl/scalar_eval.h), so the analysis and the
// interpreter cannot disagree on what an op computes; where an endpoint wraps in the result's dtype the
// result is unknown, since past a wrapped endpoint the values in between are no longer an interval.
#pragma once

#include "dsl/dtype.h"
#include "dsl/ir.h"

#include <algorithm>
#include <cstdint>
#include <optional>

namespace kiln {

struct Interval {
  int64_t lo = 0, hi = 0;
  bool known = false;

  static Interval unknown() { return {}; }
  static Interval exact(int64_t v) { return {v, v, true}; }
  static Interval of(int64_t lo, int64_t hi) { return {std::min(lo, hi), std::max(lo, hi), true}; }
  bool is_exact() const { return known && lo == hi; }
  // Unknown holds every value, so it contains everything.
  bool contains(const Interval& o) const { return !known || (o.known && lo <= o.lo && o.hi <= hi); }
};

// The smallest interval holding both.
Interval hull(const Interval& a, const Interval& b);

// x op y on integers of dtype `t` by the interpreter's rules, or nullopt where they wrap the result.
std::optional<int64_t> exact_int_op(BinaryOp op, int64_t x, int64_t y, DType t);
// The same in i64, the type of element offsets from a pointer parameter's address (and of trip counts).
inline std::optional<int64_t> exact_offset_op(BinaryOp op, int64_t x, int64_t y) {
  return exact_int_op(op, x, y, DType::i64);
}

// The values of `a op b` for a in `a` and b in `b`, integers of dtype `t` (comparisons: [0, 1]). And/Or are
// bounded for non-negative operands only; a divisor interval holding 0 gives unknown.
Interval interval_binary(BinaryOp op, const Interval& a, const Interval& b, DType t);
// The values of `op x` (Neg, Abs, Not) for x in `x`, integers of dtype `t`.
Interval interval_unary(UnaryOp op, const Interval& x, DType t);
// The values of the integers in `x` cast to the integer dtype `to`.
Interval interval_cast(const Interval& x, DType to);

} // namespace kiln
