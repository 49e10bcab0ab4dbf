// The kernel of the block-pointer atomic_add tests (dsl/dsl.h, codegen/plan_bulk_reductions.h): program p adds
// its (BR, BC) tile of x to y's block at rows row_off + (p % 2) * shift, columns col_off, through a block pointer
// over an (R, C) tensor with strides (stride_r, stride_c), both dims boundary-checked. Programs of the same
// parity add to the same block, so the adds must be atomic; a block that crosses the tensor's edge adds only what
// lies inside. With `also_loads_y` each program first reads y[0] into its tile (so the code generator must not
// let the adds land late: the element path).
#pragma once

#include "dsl/dsl.h"
#include "dsl/host_buffer.h"

#include <vector>

namespace kiln_test {

// Arguments: x (dt, [P][BR][BC] dense), y (dt), R, C (i32), stride_r, stride_c (i64), row_off, col_off,
// shift (i32). Grid: (P, 1, 1).
inline kiln::Kernel block_atomic_add_kernel(int64_t BR, int64_t BC, kiln::DType dt, int num_warps,
                                            bool also_loads_y = false) {
  using namespace kiln;
  Config config;
  config.num_warps = num_warps;
  KernelBuilder kb(also_loads_y ? "block_atomic_add_reading" : "block_atomic_add", config);
  Value x = kb.arg_ptr("x", dt), y = kb.arg_ptr("y", dt);
  Value R = kb.arg("R", i32), C = kb.arg("C", i32);
  Value stride_r = kb.arg("stride_r", i64), stride_c = kb.arg("stride_c", i64);
  Value row_off = kb.arg("row_off", i32), col_off = kb.arg("col_off", i32), shift = kb.arg("shift", i32);
  Value p = program_id(0);
  Value tile = load(make_block_ptr(x + p.to(i64) * (BR * BC), {BR, BC}, {BC, 1}, {0, 0}, {BR, BC}, {1, 0}));
  if (also_loads_y)
    tile = tile + load(y);
  Value rows = row_off + (p % 2) * shift;
  atomic_add(make_block_ptr(y, {R, C}, {stride_r, stride_c}, {rows, col_off}, {BR, BC}, {1, 0}), tile, {0, 1});
  return kb.finish();
}

// y after the kernel, in double: y0 plus every program's tile where it lies inside the tensor.
inline std::vector<double> block_atomic_add_reference(const kiln::HostBuffer& x, const kiln::HostBuffer& y0,
                                                      int64_t programs, int64_t BR, int64_t BC, int64_t R, int64_t C,
                                                      int64_t stride_r, int64_t stride_c, int64_t row_off,
                                                      int64_t col_off, int64_t shift) {
  std::vector<double> y(static_cast<size_t>(y0.numel()));
  for (int64_t i = 0; i < y0.numel(); ++i)
    y[static_cast<size_t>(i)] = y0.get(i);
  for (int64_t p = 0; p < programs; ++p)
    for (int64_t i = 0; i < BR; ++i)
      for (int64_t j = 0; j < BC; ++j) {
        const int64_t r = row_off + (p % 2) * shift + i, c = col_off + j;
        if (r >= 0 && r < R && c >= 0 && c < C)
          y[static_cast<size_t>(r * stride_r + c * stride_c)] += x.get((p * BR + i) * BC + j);
      }
  return y;
}

} // namespace kiln_test
