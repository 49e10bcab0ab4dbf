#include "dsl/scalar_eval.h"

namespace kiln {

namespace scalar_detail {
void division_by_zero(BinaryOp op, int64_t dividend) {
  fail("{}: integer division by zero ({} {} 0)", binary_name(op), dividend, op == BinaryOp::Div ? "/" : "%");
}
} // namespace scalar_detail

int64_t float_to_int(double x, DType t) {
  if (t == DType::i1)
    return x != 0;
  if (std::isnan(x))
    return 0;
  x = std::trunc(x);
  int64_t v;
  if (x <= -9223372036854775808.0)
    v = std::numeric_limits<int64_t>::min();
  else if (x >= 9223372036854775808.0) // 2^63 is not an int64
    v = std::numeric_limits<int64_t>::max();
  else
    v = static_cast<int64_t>(x);
  return wrap_to_width(static_cast<uint64_t>(v), t);
}

double int_to_float(int64_t v, DType t) {
  switch (t) {
  case DType::f64:
    return static_cast<double>(v);
  case DType::f32:
    return static_cast<float>(v); // one rounding, straight from the integer
  default:
    return round_to_dtype(static_cast<double>(static_cast<float>(v)), t);
  }
}

ScalarValue ScalarValue::of_int(int64_t v, DType t) {
  KILN_INTERNAL_CHECK(is_int(t), "ScalarValue::of_int with the float dtype {}", dtype_name(t));
  return ScalarValue{t, wrap_to_width(static_cast<uint64_t>(v), t), 0};
}

ScalarValue ScalarValue::of_float(double v, DType t) {
  KILN_INTERNAL_CHECK(is_float(t), "ScalarValue::of_float with the integer dtype {}", dtype_name(t));
  return ScalarValue{t, 0, round_to_float(v, t)};
}

ScalarValue ScalarValue::of_double(double v, DType t) {
  return is_float(t) ? of_float(v, t) : ScalarValue{t, float_to_int(v, t), 0};
}

ScalarValue eval_unary(UnaryOp op, const ScalarValue& x) {
  const DType t = x.dtype;
  if (is_float(t))
    return with_float_unary(op, t, [&](auto fn) { return ScalarValue{t, 0, fn(x.f)}; });
  return with_int_unary(op, t, [&](auto fn) { return ScalarValue{t, fn(x.i).value, 0}; });
}

ScalarValue eval_binary(BinaryOp op, const ScalarValue& a, const ScalarValue& b) {
  KILN_INTERNAL_CHECK(a.dtype == b.dtype, "eval_binary on {} and {}", dtype_name(a.dtype),
                      dtype_name(b.dtype));
  const DType t = a.dtype;
  if (!is_float(t)) {
    const DType result = is_comparison(op) ? DType::i1 : t;
    return with_int_binary(op, t, [&](auto fn) { return ScalarValue{result, fn(a.i, b.i).value, 0}; });
  }
  if (is_comparison(op))
    return with_float_comparison(op, [&](auto fn) { return ScalarValue{DType::i1, fn(a.f, b.f), 0}; });
  return with_float_binary(op, t, [&](auto fn) { return ScalarValue{t, 0, fn(a.f, b.f)}; });
}

ScalarValue eval_cast(const ScalarValue& x, DType to) {
  if (is_float(x.dtype))
    return ScalarValue::of_double(x.f, to);
  if (is_float(to))
    return ScalarValue{to, 0, int_to_float(x.i, to)};
  return ScalarValue{to, cast_int(x.i, to).value, 0};
}

ScalarValue eval_constant(const Op& op, DType t) {
  if (is_float(t))
    return ScalarValue::of_float(op.f, t);
  if (std::optional<int64_t> v = op.exact_int())
    return ScalarValue::of_int(*v, t);
  return ScalarValue::of_double(op.f, t);
}

} // namespace kiln
