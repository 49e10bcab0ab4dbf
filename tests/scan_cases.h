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

struct ScanCase {
  kiln::DType dtype;
  kiln::Shape shape;
  int axis;
  kiln::ReduceOp combine;
  bool reverse = false;
  int num_warps = 4;

  std::string name() const {
    std::string s = fmt::format("{}_{}_axis{}_{}", kiln::reduce_name(combine), kiln::dtype_name(dtype), axis,
                                fmt::join(shape, "x"));
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
  };
}

// Inputs whose every prefix sum is exact in the dtype (so that an order of additions cannot matter):
// multiples of 1/4 in [-4, 4] (integers in [-4, 4] for bf16 and the integer dtypes), except f32/f64 random
// reals when `reals`.
inline std::vector<double> scan_inputs(const ScanCase& c, unsigned seed, bool reals = false) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> quarters(-16, 16);
  std::uniform_real_distribution<double> real(-4, 4);
  const bool whole = !kiln::is_float(c.dtype) || c.dtype == kiln::DType::bf16;
  std::vector<double> v(static_cast<size_t>(c.numel()));
  for (double& x : v)
    x = reals && c.dtype == kiln::DType::f32   ? static_cast<float>(real(rng)) // as the buffer holds it
        : reals && c.dtype == kiln::DType::f64 ? real(rng)
        : whole                                ? std::round(quarters(rng) / 4.0)
                                               : quarters(rng) / 4.0;
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
  store(y + offs, scan(load(x + offs), c.axis, c.combine, c.reverse));
  return kb.finish();
}

// The reference: each line scanned in double (integers in int64, wrapped to the dtype by the buffer).
inline std::vector<double> scan_reference(const ScanCase& c, const std::vector<double>& x) {
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
      acc = q == 0                             ? v
            : c.combine == kiln::ReduceOp::Sum ? acc + v
            : c.combine == kiln::ReduceOp::Max ? std::max(acc, v)
                                               : std::min(acc, v);
      y[static_cast<size_t>(at)] = acc;
    }
  }
  return y;
}

} // namespace kiln_test
