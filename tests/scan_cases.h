// Scan cases shared by the interpreter, codegen and GPU tests (tests/{interp,codegen,gpu}/scan_*): a tile of
// `shape` loaded row-major from x, scanned along `axis` with `combine` (reversed or not), stored row-major to
// y. Shapes include tiles smaller than a warp and lines shorter than the thread count, so that every split of
// codegen/plan_scan.h (a thread a line, runs of a line) is exercised.
#pragma once

#include "dsl/dsl.h"

#include <fmt/format.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

namespace kiln_test {

// The user combines of associative_scan the cases use (combine == ReduceOp::Combine), each associative:
// Add is a + b; SumWithLiteral is fma(a, 1, b) for floats and a * 1 + b for integers (a literal and a
// three-operand op inside the combine); MaxWhere is where(a > b, a, b); AbsMaxFirst is where(abs(a) >=
// abs(b), a, b), the first element of largest magnitude.
enum class UserCombine { None, Add, SumWithLiteral, MaxWhere, AbsMaxFirst };

inline const char* user_combine_name(UserCombine u) {
  switch (u) {
  case UserCombine::None:
    return "";
  case UserCombine::Add:
    return "add";
  case UserCombine::SumWithLiteral:
    return "sum_with_literal";
  case UserCombine::MaxWhere:
    return "max_where";
  case UserCombine::AbsMaxFirst:
    return "abs_max_first";
  }
  return "?";
}

// The DSL function of a user combine.
inline kiln::Value user_combine(UserCombine u, kiln::Value a, kiln::Value b) {
  using namespace kiln;
  switch (u) {
  case UserCombine::Add:
    return a + b;
  case UserCombine::SumWithLiteral:
    return is_float(a.dtype()) ? kiln::fma(a, 1.0, b) : a * 1 + b;
  case UserCombine::MaxWhere:
    return where(a > b, a, b);
  case UserCombine::AbsMaxFirst:
    return where(abs(a) >= abs(b), a, b);
  case UserCombine::None:
    break;
  }
  return Value();
}

// The reference of a user combine on values of the dtype (the caller rounds the result).
inline double user_combine_reference(UserCombine u, double a, double b) {
  switch (u) {
  case UserCombine::Add:
  case UserCombine::SumWithLiteral:
    return a + b;
  case UserCombine::MaxWhere:
    return a > b ? a : b;
  case UserCombine::AbsMaxFirst:
    return std::fabs(a) >= std::fabs(b) ? a : b;
  case UserCombine::None:
    break;
  }
  return 0;
}

struct ScanCase {
  kiln::DType dtype;
  kiln::Shape shape;
  int axis;
  kiln::ReduceOp combine;
  bool reverse = false;
  int num_warps = 4;
  UserCombine user = UserCombine::None; // with combine == ReduceOp::Combine

  // Whether the scan adds (so that float results depend on the order of additions), or multiplies.
  bool adds() const {
    return combine == kiln::ReduceOp::Sum || user == UserCombine::Add || user == UserCombine::SumWithLiteral;
  }
  bool multiplies() const { return combine == kiln::ReduceOp::Prod; }

  std::string name() const {
    std::string s =
        fmt::format("{}{}{}_{}_axis{}_{}", kiln::reduce_name(combine), user == UserCombine::None ? "" : "_",
                    user_combine_name(user), kiln::dtype_name(dtype), axis, fmt::join(shape, "x"));
    return s + (reverse ? "_reverse" : "") + (num_warps != 4 ? fmt::format("_w{}", num_warps) : "");
  }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
};

inline std::vector<ScanCase> scan_cases() {
  using kiln::DType;
  using kiln::ReduceOp;
  return {
      {DType::f32, {8}, 0, ReduceOp::Sum},
      {DType::i32, {16}, 0, ReduceOp::Sum, true},
      {DType::f32, {1024}, 0, ReduceOp::Sum}, // one line: runs of 32
      {DType::i32, {256}, 0, ReduceOp::Max, true},
      {DType::f32, {4, 32}, 1, ReduceOp::Sum},
      {DType::f32, {4, 32}, 0, ReduceOp::Sum},
      {DType::i32, {4, 32}, 1, ReduceOp::Sum, true},
      {DType::i32, {32, 4}, 0, ReduceOp::Sum},
      {DType::f32, {2, 8}, 1, ReduceOp::Max},
      {DType::i32, {2, 8}, 0, ReduceOp::Min, true},
      {DType::f32, {256, 4}, 1, ReduceOp::Sum}, // 256 lines: a thread a line, two lines each
      {DType::f16, {16, 64}, 1, ReduceOp::Sum},
      {DType::bf16, {64, 16}, 0, ReduceOp::Sum, true},
      {DType::f64, {8, 128}, 1, ReduceOp::Min},
      {DType::i64, {64, 2}, 0, ReduceOp::Sum},
      {DType::f32, {16, 16}, 0, ReduceOp::Max, false, 1}, // one warp
      {DType::i32, {8, 64}, 1, ReduceOp::Sum, false, 8},
      // cumprod
      {DType::f32, {1024}, 0, ReduceOp::Prod},
      {DType::i32, {4, 32}, 1, ReduceOp::Prod, true},
      {DType::f16, {16, 64}, 1, ReduceOp::Prod},
      {DType::bf16, {2, 8}, 0, ReduceOp::Prod},
      {DType::f64, {8, 128}, 1, ReduceOp::Prod, true},
      {DType::i64, {64, 2}, 0, ReduceOp::Prod},
      // associative_scan with a combine of the user's
      {DType::i32, {256}, 0, ReduceOp::Combine, false, 4, UserCombine::Add},
      {DType::f32, {1024}, 0, ReduceOp::Combine, false, 4, UserCombine::SumWithLiteral},
      {DType::f32, {4, 32}, 1, ReduceOp::Combine, true, 4, UserCombine::MaxWhere},
      {DType::i32, {32, 4}, 0, ReduceOp::Combine, false, 4, UserCombine::AbsMaxFirst},
      {DType::f16, {16, 64}, 1, ReduceOp::Combine, false, 4, UserCombine::SumWithLiteral},
      {DType::bf16, {64, 16}, 0, ReduceOp::Combine, true, 4, UserCombine::Add},
      {DType::f64, {2, 8}, 1, ReduceOp::Combine, false, 4, UserCombine::MaxWhere},
      {DType::i64, {8, 64}, 1, ReduceOp::Combine, true, 8, UserCombine::AbsMaxFirst},
  };
}

// Inputs whose every prefix sum is exact in the dtype (so that an order of additions cannot matter):
// multiples of 1/4 in [-4, 4] (integers in [-4, 4] for bf16 and the integer dtypes), except f32/f64 random
// reals when `reals`. A product's factors are +-1 three times in four, else +-2 or +-1/2 (+-2 or +-3 for
// integers), so that every float prefix is a power of two well inside the dtype's range; its reals are
// 2^u, u uniform in [-1, 1], with a random sign (no drift of the prefixes' exponents).
inline std::vector<double> scan_inputs(const ScanCase& c, unsigned seed, bool reals = false) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> quarters(-16, 16), eighths(0, 15);
  std::uniform_real_distribution<double> real(-4, 4), log2_magnitude(-1, 1);
  const bool whole = !kiln::is_float(c.dtype) || c.dtype == kiln::DType::bf16;
  const bool wide = c.dtype == kiln::DType::f32 || c.dtype == kiln::DType::f64;
  std::vector<double> v(static_cast<size_t>(c.numel()));
  for (double& x : v) {
    if (c.multiplies()) {
      const int e = eighths(rng);
      const double sign = e % 2 ? -1 : 1;
      x = reals && wide        ? sign * std::exp2(log2_magnitude(rng))
          : e < 12             ? sign
          : !is_float(c.dtype) ? sign * (e < 14 ? 2 : 3)
                               : sign * (e < 14 ? 2 : 0.5);
    } else {
      x = reals && wide ? real(rng) : whole ? std::round(quarters(rng) / 4.0) : quarters(rng) / 4.0;
    }
    if (c.dtype == kiln::DType::f32)
      x = static_cast<float>(x); // as the buffer holds it
  }
  return v;
}

// The kernel of a case: y = scan(x) over one tile.
inline kiln::Kernel scan_kernel(const ScanCase& c) {
  using namespace kiln;
  Config cfg;
  cfg.num_warps = c.num_warps;
  KernelBuilder kb("scan_" + c.name(), cfg);
  Value x = kb.arg_ptr("x", c.dtype), y = kb.arg_ptr("y", c.dtype);
  Value offs = arange(0, c.shape.back());
  if (c.shape.size() == 2)
    offs = arange(0, c.shape[0]).expand_dims(1) * c.shape[1] + offs.expand_dims(0); // (R, C) row-major
  Value xs = load(x + offs);
  store(y + offs,
        c.combine == ReduceOp::Combine
            ? associative_scan(
                  xs, c.axis, [&](Value a, Value b) { return user_combine(c.user, a, b); }, c.reverse)
            : scan(xs, c.axis, c.combine, c.reverse));
  return kb.finish();
}

// A running maximum along rows of any length, 16 columns at a time: each chunk's associative_scan (maximum as
// a user combine) and the maximum so far, carried by the loop; one program a row of n i32.
inline kiln::Kernel chunked_running_max_kernel() {
  using namespace kiln;
  KernelBuilder kb("chunked_running_max");
  Value x = kb.arg_ptr("x", i32), y = kb.arg_ptr("y", i32), n = kb.arg("n", i32);
  Value row = program_id(0) * n;
  Value best = scalar(-2147483647 - 1, i32);
  for_range(0, n, 16, [&](Value start) {
    Value offs = start + arange(0, 16);
    Value mask = offs < n;
    Value v = load(x + row + offs, mask, -2147483647 - 1);
    Value prefix = associative_scan(v, 0, [](Value a, Value b) { return maximum(a, b); });
    store(y + row + offs, maximum(prefix, best), mask);
    best = maximum(best, max(v, 0));
  });
  return kb.finish();
}

// The reference: each line scanned in double (integers wrapped to the dtype by the buffer; the inputs'
// integer products stay far below 2^53); a user combine's every result rounded to the dtype, as its ops
// round.
inline std::vector<double> scan_reference(const ScanCase& c, const std::vector<double>& x) {
  auto round_to_dtype = [&](double v) {
    return c.dtype == kiln::DType::f32 ? static_cast<double>(static_cast<float>(v)) : v;
  }; // f16/bf16 user combines take inputs whose sums are exact
  const int64_t len = c.shape[static_cast<size_t>(c.axis)];
  const int64_t inner = c.shape.size() == 2 && c.axis == 0 ? c.shape[1] : 1;
  const int64_t lines = c.numel() / len;
  std::vector<double> y(x.size());
  for (int64_t l = 0; l < lines; ++l) {
    const int64_t first = (l / inner) * len * inner + l % inner;
    double acc = 0;
    for (int64_t q = 0; q < len; ++q) {
      const int64_t at = first + (c.reverse ? len - 1 - q : q) * inner;
      const double v = x[static_cast<size_t>(at)];
      acc = q == 0                                 ? v
            : c.combine == kiln::ReduceOp::Combine ? round_to_dtype(user_combine_reference(c.user, acc, v))
            : c.multiplies()                       ? acc * v
            : c.combine == kiln::ReduceOp::Sum     ? acc + v
            : c.combine == kiln::ReduceOp::Max     ? std::max(acc, v)
                                                   : std::min(acc, v);
      y[static_cast<size_t>(at)] = acc;
    }
  }
  return y;
}

} // namespace kiln_test
