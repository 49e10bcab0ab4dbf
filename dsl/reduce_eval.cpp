#include "dsl/reduce_eval.h"

#include "dsl/combine_eval.h"
#include "dsl/scalar_eval.h"

#include <algorithm>
#include <cmath>

namespace kiln {

namespace {

// Element l along the axis of line (o, in) is at o * len * inner + l * inner + in.
struct AxisLines {
  int64_t outer = 1, len = 1, inner = 1;
  AxisLines(const Shape& s, int axis) : len(s[axis]) {
    for (int d = 0; d < axis; ++d)
      outer *= s[d];
    for (size_t d = axis + 1; d < s.size(); ++d)
      inner *= s[d];
  }
  template <typename Fn>
  void each_line(Fn&& fn) const { // fn(first element, stride along the axis, line index)
    for (int64_t o = 0; o < outer; ++o)
      for (int64_t in = 0; in < inner; ++in)
        fn(o * len * inner + in, inner, o * inner + in);
  }
};

// Whether a max/min keeps `v` over `acc`: a number beats NaN, NaN never wins, and ties keep the first.
bool replaces(ReduceOp r, double acc, double v) {
  return !std::isnan(v) && (std::isnan(acc) || (r == ReduceOp::Min ? v < acc : v > acc));
}
double combine_float(ReduceOp r, double acc, double v) {
  return r == ReduceOp::Sum ? acc + v : r == ReduceOp::Prod ? acc * v : replaces(r, acc, v) ? v : acc;
}
int64_t combine_int(ReduceOp r, int64_t acc, int64_t v, DType t) {
  if (r == ReduceOp::Sum)
    return wrap_to_width(static_cast<uint64_t>(acc) + static_cast<uint64_t>(v), t);
  if (r == ReduceOp::Prod) // modulo 2^64, then to the width: two's-complement wrapping
    return wrap_to_width(static_cast<uint64_t>(acc) * static_cast<uint64_t>(v), t);
  return r == ReduceOp::Max ? std::max(acc, v) : std::min(acc, v);
}

// Calls fn(first element, position of element q in scan order) for every line along the axis.
template <typename Fn> void each_scan_line(const AxisLines& lines, bool reverse, Fn&& fn) {
  lines.each_line([&](int64_t first, int64_t stride, int64_t) {
    fn([=](int64_t q) { return first + (reverse ? lines.len - 1 - q : q) * stride; });
  });
}

} // namespace

void reduce_along_axis(const Kernel& k, const Op& op, const std::vector<double>& xf,
                       const std::vector<int64_t>& xi, std::vector<double>& out_f,
                       std::vector<int64_t>& out_i) {
  const Type& xt = k.type(op.operands[0]);
  const DType t = xt.elem;
  KILN_INTERNAL_CHECK(op.reduce != ReduceOp::Combine, "a reduction with a user combine at {}", op.loc.str());
  const AxisLines lines(xt.shape, op.axis);
  const bool argmax = op.kind == OpKind::ArgMax;
  const ReduceOp r = argmax ? ReduceOp::Max : op.reduce;
  const bool result_float = is_float(t) && !argmax;
  const int64_t n = lines.outer * lines.inner;
  (result_float ? (void)out_f.resize(n) : (void)out_i.resize(n));
  lines.each_line([&](int64_t first, int64_t stride, int64_t line) {
    int64_t best_at = 0;
    if (is_float(t)) {
      double acc = xf[first];
      for (int64_t l = 1; l < lines.len; ++l) {
        const double v = xf[first + l * stride];
        if (argmax && replaces(ReduceOp::Max, acc, v))
          best_at = l;
        acc = combine_float(r, acc, v);
      }
      (argmax ? (void)(out_i[line] = best_at) : (void)(out_f[line] = round_to_float(acc, t)));
      return;
    }
    int64_t acc = xi[first];
    for (int64_t l = 1; l < lines.len; ++l) {
      const int64_t v = xi[first + l * stride];
      if (argmax && v > acc)
        best_at = l;
      acc = combine_int(r, acc, v, t);
    }
    out_i[line] = argmax ? best_at : acc;
  });
}

void scan_along_axis(const Kernel& k, const Op& op, const std::vector<double>& xf,
                     const std::vector<int64_t>& xi, std::vector<double>& out_f,
                     std::vector<int64_t>& out_i) {
  const Type& xt = k.type(op.operands[0]);
  const DType t = xt.elem;
  const AxisLines lines(xt.shape, op.axis);
  const int64_t n = xt.numel();
  (is_float(t) ? (void)out_f.resize(n) : (void)out_i.resize(n));
  if (op.reduce == ReduceOp::Combine) { // the user's ops, each rounding to the dtype as it would anywhere
    CombineEval combine(k, op.regions.at(0));
    auto get = [&](int64_t e) { return is_float(t) ? ScalarValue{t, 0, xf[e]} : ScalarValue{t, xi[e], 0}; };
    auto put = [&](int64_t e, const ScalarValue& v) {
      if (is_float(t))
        out_f[e] = v.f;
      else
        out_i[e] = v.i;
    };
    each_scan_line(lines, op.reverse, [&](auto at) {
      ScalarValue acc = get(at(0));
      put(at(0), acc);
      for (int64_t q = 1; q < lines.len; ++q)
        put(at(q), acc = combine(acc, get(at(q))));
    });
    return;
  }
  each_scan_line(lines, op.reverse, [&](auto at) {
    if (is_float(t)) {
      double acc = xf[at(0)];
      out_f[at(0)] = acc;
      for (int64_t q = 1; q < lines.len; ++q) {
        acc = combine_float(op.reduce, acc, xf[at(q)]);
        out_f[at(q)] = round_to_float(acc, t);
      }
      return;
    }
    int64_t acc = xi[at(0)];
    out_i[at(0)] = acc;
    for (int64_t q = 1; q < lines.len; ++q) {
      acc = combine_int(op.reduce, acc, xi[at(q)], t);
      out_i[at(q)] = acc;
    }
  });
}

namespace {
// Whether float `a` sorts before `b`: -inf < ... < -0 < +0 < ... < inf < NaN (the generated code's rule).
bool sorts_before(double a, double b) {
  if (std::isnan(a) || std::isnan(b))
    return !std::isnan(a) && std::isnan(b);
  return a < b || (a == b && std::signbit(a) && !std::signbit(b));
}
} // namespace

void sort_along_axis(const Kernel& k, const Op& op, const std::vector<double>& xf,
                     const std::vector<int64_t>& xi, std::vector<double>& out_f,
                     std::vector<int64_t>& out_i) {
  const Type& xt = k.type(op.operands[0]);
  const AxisLines lines(xt.shape, op.axis);
  const bool floats = is_float(xt.elem);
  (floats ? (void)out_f.resize(xt.numel()) : (void)out_i.resize(xt.numel()));
  std::vector<double> fs;
  std::vector<int64_t> is;
  each_scan_line(lines, op.reverse,
                 [&](auto at) { // reversed positions: descending is ascending read backwards
                   if (floats) {
                     fs.clear();
                     for (int64_t q = 0; q < lines.len; ++q)
                       fs.push_back(xf[at(q)]);
                     std::stable_sort(fs.begin(), fs.end(), sorts_before);
                     for (int64_t q = 0; q < lines.len; ++q)
                       out_f[at(q)] = fs[q];
                   } else {
                     is.clear();
                     for (int64_t q = 0; q < lines.len; ++q)
                       is.push_back(xi[at(q)]);
                     std::sort(is.begin(), is.end());
                     for (int64_t q = 0; q < lines.len; ++q)
                       out_i[at(q)] = is[q];
                   }
                 });
}

void run_along_axis(const Kernel& k, const Op& op, const std::vector<double>& xf,
                    const std::vector<int64_t>& xi, std::vector<double>& out_f, std::vector<int64_t>& out_i) {
  if (op.kind == OpKind::Scan)
    return scan_along_axis(k, op, xf, xi, out_f, out_i);
  if (op.kind == OpKind::Sort)
    return sort_along_axis(k, op, xf, xi, out_f, out_i);
  reduce_along_axis(k, op, xf, xi, out_f, out_i);
}

} // namespace kiln
