// Sort cases shared by the interpreter, codegen and GPU tests (tests/{interp,codegen,gpu}/...sort...): a tile
// of `shape` loaded row-major from x, sorted along `axis` (ascending or descending), stored row-major to y.
// Inputs hold repeats, and for floats -0 and +0, infinities and NaN, so that sort's total order is exercised.
#pragma once

#include "dsl/dsl.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <vector>

namespace kiln_test {

struct SortCase {
  kiln::DType dtype;
  kiln::Shape shape;
  int axis;
  bool descending = false;
  int num_warps = 4;

  std::string name() const {
    return fmt::format("{}_axis{}_{}{}{}", kiln::dtype_name(dtype), axis, fmt::join(shape, "x"),
                       descending ? "_descending" : "", num_warps != 4 ? fmt::format("_w{}", num_warps) : "");
  }
  int64_t numel() const {
    int64_t n = 1;
    for (int64_t d : shape)
      n *= d;
    return n;
  }
};

inline std::vector<SortCase> sort_cases() {
  using kiln::DType;
  return {
      {DType::f32, {8}, 0},
      {DType::i32, {1024}, 0, true},
      {DType::f32, {4, 32}, 1},
      {DType::f32, {32, 4}, 0, true},
      {DType::i64, {2, 64}, 1},
      {DType::f16, {16, 16}, 0},
      {DType::bf16, {8, 32}, 1, true},
      {DType::f64, {64, 2}, 0},
      {DType::i32, {256, 4}, 1, false, 1}, // more lines than threads
      {DType::f32, {2, 512}, 1, false, 8},
  };
}

// Integers in [-20, 20] (many repeats); for floats multiples of 1/4 in [-5, 5], one in eight drawn instead
// from -0, +0, -inf, inf and NaN.
inline std::vector<double> sort_inputs(const SortCase& c, unsigned seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> small(-20, 20), special(0, 39);
  const double specials[] = {-0.0, 0.0, -INFINITY, INFINITY, std::numeric_limits<double>::quiet_NaN()};
  std::vector<double> v(static_cast<size_t>(c.numel()));
  for (double& x : v) {
    const int s = special(rng);
    x = !kiln::is_float(c.dtype) ? small(rng) : s < 5 ? specials[s] : small(rng) / 4.0;
  }
  return v;
}

// The kernel of a case: y = sort(x) over one tile.
inline kiln::Kernel sort_kernel(const SortCase& c) {
  using namespace kiln;
  Config cfg;
  cfg.num_warps = c.num_warps;
  KernelBuilder kb("sort_" + c.name(), cfg);
  Value x = kb.arg_ptr("x", c.dtype), y = kb.arg_ptr("y", c.dtype);
  Value offs = arange(0, c.shape.back());
  if (c.shape.size() == 2)
    offs = arange(0, c.shape[0]).expand_dims(1) * c.shape[1] + offs.expand_dims(0); // (R, C) row-major
  store(y + offs, sort(load(x + offs), c.axis, c.descending));
  return kb.finish();
}

// The reference: each line sorted by the key (NaN, value, +0 after -0), reversed when descending.
inline std::vector<double> sort_reference(const SortCase& c, const std::vector<double>& x) {
  const int64_t len = c.shape[static_cast<size_t>(c.axis)];
  const int64_t inner = c.shape.size() == 2 && c.axis == 0 ? c.shape[1] : 1;
  const int64_t lines = c.numel() / len;
  auto key = [](double v) {
    return std::isnan(v) ? std::make_tuple(1, 0.0, 0) : std::make_tuple(0, v, std::signbit(v) ? 0 : 1);
  };
  std::vector<double> y(x.size());
  for (int64_t l = 0; l < lines; ++l) {
    const int64_t first = (l / inner) * len * inner + l % inner;
    std::vector<double> line;
    for (int64_t q = 0; q < len; ++q)
      line.push_back(x[static_cast<size_t>(first + q * inner)]);
    std::sort(line.begin(), line.end(), [&](double a, double b) { return key(a) < key(b); });
    if (c.descending)
      std::reverse(line.begin(), line.end());
    for (int64_t q = 0; q < len; ++q)
      y[static_cast<size_t>(first + q * inner)] = line[static_cast<size_t>(q)];
  }
  return y;
}

// Whether two sorted elements agree: the same value and sign, or both NaN.
inline bool same_sorted_element(double a, double b) {
  return (std::isnan(a) && std::isnan(b)) || (a == b && std::signbit(a) == std::signbit(b));
}

} // namespace kiln_test
