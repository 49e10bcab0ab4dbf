// The staged-load kernel of the codegen and GPU tests: each program takes ROWS rows of x and y (n_rows,
// n_cols) and walks them in (ROWS, CHUNK) tiles read through two block pointers (zero padding past the
// edges), carrying an f32 running sum of x * y per tile element; after the loop it reduces it to each row's
// dot product. x is row-major; y row-major or column-major (its block pointer's order (0, 1): the tile's
// contiguous dim is the other one). With num_stages >= 2 the loop is a streaming loop whose two register
// loads the code generator stages through one shared ring (SharedTile::to_registers).
#pragma once

#include "dsl/dsl.h"
#include "dsl/interpreter.h"

#include <ostream>
#include <random>
#include <string>
#include <vector>

namespace kiln_test {

struct ChunkedRowDot {
  kiln::DType dtype;
  int64_t rows, chunk;
  int num_warps, num_stages;
  bool y_column_major = false;
};

inline std::string label(const ChunkedRowDot& c) {
  return std::string(kiln::dtype_name(c.dtype)) + "_R" + std::to_string(c.rows) + "_C" + std::to_string(c.chunk) +
         "_w" + std::to_string(c.num_warps) + "_s" + std::to_string(c.num_stages) + (c.y_column_major ? "_yT" : "");
}
inline void PrintTo(const ChunkedRowDot& c, std::ostream* os) { *os << label(c); }

// The cases the codegen and GPU tests share: 1 to 4 stages, 16-bit and f32 tiles, 1 to 16 rows, a column-major y.
inline std::vector<ChunkedRowDot> chunked_row_dot_cases() {
  using kiln::DType;
  return {{DType::f16, 4, 256, 4, 1},  {DType::f16, 4, 256, 4, 2},  {DType::bf16, 2, 512, 8, 3},
          {DType::f32, 4, 128, 4, 4},  {DType::f16, 1, 1024, 4, 3}, {DType::f16, 16, 64, 4, 3, true}};
}

// Arguments: x, y (dtype), out (f32, n_rows), n_rows, n_cols (i32). x is row-major (row stride n_cols); y
// row-major too, or column-major (column stride n_rows). Grid: (cdiv(n_rows, rows), 1, 1).
inline kiln::Kernel chunked_row_dot_kernel(const ChunkedRowDot& c) {
  using namespace kiln;
  Config config;
  config.num_warps = c.num_warps;
  config.num_stages = c.num_stages;
  KernelBuilder kb("chunked_row_dot", config);
  Value x = kb.arg_ptr("x", c.dtype), y = kb.arg_ptr("y", c.dtype), out = kb.arg_ptr("out", f32);
  Value n_rows = kb.arg("n_rows", i32), n_cols = kb.arg("n_cols", i32);
  Value row0 = program_id(0) * c.rows;
  Value xt = make_block_ptr(x, {n_rows, n_cols}, {n_cols, 1}, {row0, 0}, {c.rows, c.chunk}, {1, 0});
  Value yt = c.y_column_major
                 ? make_block_ptr(y, {n_rows, n_cols}, {1, n_rows}, {row0, 0}, {c.rows, c.chunk}, {0, 1})
                 : make_block_ptr(y, {n_rows, n_cols}, {n_cols, 1}, {row0, 0}, {c.rows, c.chunk}, {1, 0});
  Value acc = zeros({c.rows, c.chunk}, f32);
  for_range(0, n_cols, c.chunk, [&](Value) {
    Value xs = load(xt, BoundaryCheck{0, 1}).to(f32); // x's load first, then y's (the tests count on it)
    Value ys = load(yt, BoundaryCheck{0, 1}).to(f32);
    acc = acc + xs * ys;
    xt = advance(xt, {0, c.chunk});
    yt = advance(yt, {0, c.chunk});
  });
  Value rows = row0 + arange(0, c.rows);
  store(out + rows, sum(acc, 1), rows < n_rows);
  return kb.finish();
}

// x and y (n_rows, n_cols) uniformly random in [-2, 2], rounded to the dtype; y laid out as the kernel reads
// it (column-major when asked).
inline kiln::HostBuffer chunked_row_dot_input(kiln::DType dtype, int64_t n_rows, int64_t n_cols, uint64_t seed,
                                              const char* name) {
  kiln::HostBuffer t(dtype, n_rows * n_cols, name);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(-2.0, 2.0);
  for (int64_t i = 0; i < t.numel(); ++i)
    t.set(i, dist(rng));
  return t;
}

// Each row's dot product in double, from the values as stored.
inline std::vector<double> chunked_row_dot_reference(const kiln::HostBuffer& x, const kiln::HostBuffer& y,
                                                     int64_t n_rows, int64_t n_cols, bool y_column_major) {
  std::vector<double> out(static_cast<size_t>(n_rows));
  for (int64_t r = 0; r < n_rows; ++r)
    for (int64_t c = 0; c < n_cols; ++c)
      out[static_cast<size_t>(r)] +=
          x.get(r * n_cols + c) * y.get(y_column_major ? c * n_rows + r : r * n_cols + c);
  return out;
}

} // namespace kiln_test
