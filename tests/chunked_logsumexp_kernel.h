// The streaming kernel the layout tests run (codegen, interp, GPU): each program takes ROWS rows of x
// (n_rows, n_cols) and walks them in (ROWS, CHUNK) tiles read through a block pointer (a ragged last tile
// padded with -inf), carrying an f32 running max and running sum per tile element; after the loop it reduces
// them to each row's natural-log logsumexp. The input may be f16, bf16 or f32: a 16-bit tile beside f32
// running state is the case in which the default layouts differ (8 elements a thread against 4).
#pragma once

#include "dsl/dsl.h"
#include "dsl/interpreter.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <ostream>
#include <random>
#include <string>

namespace kiln_test {

struct ChunkedLogsumexp {
  kiln::DType dtype;
  int64_t rows, chunk;
  int num_warps;
};

inline std::string label(const ChunkedLogsumexp& c) {
  return std::string(kiln::dtype_name(c.dtype)) + "_R" + std::to_string(c.rows) + "_C" +
         std::to_string(c.chunk) + "_w" + std::to_string(c.num_warps);
}
inline void PrintTo(const ChunkedLogsumexp& c, std::ostream* os) { *os << label(c); }

// Arguments: x (dtype), out (f32, n_rows), n_rows, n_cols (i32; x is row-major with row stride n_cols). Grid:
// (cdiv(n_rows, rows), 1, 1).
inline kiln::Kernel chunked_logsumexp_kernel(const ChunkedLogsumexp& c) {
  using namespace kiln;
  const double inf = std::numeric_limits<double>::infinity();
  Config config;
  config.num_warps = c.num_warps;
  config.num_stages = 1;
  KernelBuilder kb("chunked_logsumexp", config);
  Value x = kb.arg_ptr("x", c.dtype), out = kb.arg_ptr("out", f32);
  Value n_rows = kb.arg("n_rows", i32), n_cols = kb.arg("n_cols", i32);
  Value row0 = program_id(0) * c.rows;
  Value tile = make_block_ptr(x, {n_rows, n_cols}, {n_cols, 1}, {row0, 0}, {c.rows, c.chunk}, {1, 0});
  Value m = full({c.rows, c.chunk}, -inf, f32); // running max of each tile element
  Value s = zeros({c.rows, c.chunk}, f32);      // running sum of exp(x - m)
  for_range(0, n_cols, c.chunk, [&](Value) {
    Value t = load(tile, BoundaryCheck{0, 1}, Padding::NegInf).to(f32);
    Value m_new = maximum(m, t);
    Value shift = where(m_new == -inf, 0.0, m_new); // exp(-inf - -inf) would be NaN
    s = s * exp(m - shift) + exp(t - shift);
    m = m_new;
    tile = advance(tile, {0, c.chunk});
  });
  Value row_max = max(m, 1);
  Value shift = where(row_max == -inf, 0.0, row_max);
  Value lse = shift + log(sum(s * exp(m - shift.expand_dims(1)), 1));
  Value rows = row0 + arange(0, c.rows);
  store(out + rows, lse, rows < n_rows);
  return kb.finish();
}

// x (n_rows, n_cols) uniformly random in [-8, 8], rounded to the dtype; a row of -inf when n_rows > 2 (row
// 2), so that a row whose every element is -inf is covered (its logsumexp is -inf).
inline kiln::HostBuffer chunked_logsumexp_input(kiln::DType dtype, int64_t n_rows, int64_t n_cols,
                                                uint64_t seed) {
  kiln::HostBuffer x(dtype, n_rows * n_cols, "x");
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(-8.0, 8.0);
  for (int64_t i = 0; i < x.numel(); ++i)
    x.set(i, n_rows > 2 && i / n_cols == 2 ? -std::numeric_limits<double>::infinity() : dist(rng));
  return x;
}

// Each row's logsumexp in double, from the values as stored.
inline std::vector<double> chunked_logsumexp_reference(const kiln::HostBuffer& x, int64_t n_rows,
                                                       int64_t n_cols) {
  std::vector<double> lse(static_cast<size_t>(n_rows));
  for (int64_t r = 0; r < n_rows; ++r) {
    double m = -std::numeric_limits<double>::infinity(), s = 0;
    for (int64_t c = 0; c < n_cols; ++c)
      m = std::max(m, x.get(r * n_cols + c));
    for (int64_t c = 0; c < n_cols && std::isfinite(m); ++c)
      s += std::exp(x.get(r * n_cols + c) - m);
    lse[static_cast<size_t>(r)] = std::isfinite(m) ? m + std::log(s) : m;
  }
  return lse;
}

} // namespace kiln_test
