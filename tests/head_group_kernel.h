// The kernel of the parameter-cap tests (codegen/block_base.h): each program sums, over the `group` heads of
// its group, the products of that head's rows of x with one (64, 64) w, a dot per 64-row tile of x. The head,
// head0 + g, is a loop variable, so its base offset `head * stride_h` has no bound the IR proves; with `capped`
// the kernel writes min(head0 + g, H), which changes nothing (the head is < H) and lets the code generator copy
// x's tiles by TMA on sm_90a through a map H + 1 heads long. The pipelined loop sits inside the group's loop,
// as dK/dV's query loops do.
#pragma once

#include "dsl/dsl.h"
#include "dsl/interpreter.h"

#include <vector>

namespace kiln_test {

// Arguments: x (f16, [H][n][64] with head stride stride_h, row stride 64), w (f16, [64][64]), out (f32,
// [H / group][64][64]), H, group, n (i32), stride_h (i64). Grid: (H / group, 1, 1). With `starts_below_zero`
// the group's loop starts at program_id(0) - 1, so its variable may be -1 (for the code generator's tests
// only: program 0 would read before x).
inline kiln::Kernel head_group_kernel(bool capped, bool starts_below_zero = false) {
  using namespace kiln;
  Config config;
  config.num_warps = 4;
  config.num_stages = 2;
  KernelBuilder kb(capped ? "head_group_capped" : "head_group", config);
  Value x = kb.arg_ptr("x", f16), w = kb.arg_ptr("w", f16), out = kb.arg_ptr("out", f32);
  Value H = kb.arg("H", i32), group = kb.arg("group", i32), n = kb.arg("n", i32);
  Value stride_h = kb.arg("stride_h", i64);
  Value w_tile = load(make_block_ptr(w, {64, 64}, {64, 1}, {0, 0}, {64, 64}, {1, 0}));
  Value head0 = program_id(0) * group;
  Value acc = zeros({64, 64}, f32);
  for_range(starts_below_zero ? program_id(0) - 1 : zeros({}, i32), group, 1, [&](Value g) {
    Value head = capped ? minimum(head0 + g, H) : head0 + g;
    Value xp = make_block_ptr(x + head.to(i64) * stride_h, {n, 64}, {64, 1}, {0, 0}, {64, 64}, {1, 0});
    for_range(0, n, 64, [&](Value) {
      acc = dot(load(xp, BoundaryCheck{0}), w_tile, acc);
      xp = advance(xp, {64, 0});
    });
  });
  Value op = make_block_ptr(out + program_id(0).to(i64) * (64 * 64), {64, 64}, {64, 1}, {0, 0}, {64, 64}, {1, 0});
  store(op, acc);
  return kb.finish();
}

// out[p] = sum over the group's heads h and rows r < n of x[h][r] (as a row) times w, in double.
inline std::vector<double> head_group_reference(const kiln::HostBuffer& x, const kiln::HostBuffer& w, int64_t H,
                                                int64_t group, int64_t n) {
  std::vector<double> out(static_cast<size_t>(H / group * 64 * 64), 0.0);
  for (int64_t h = 0; h < H; ++h)
    for (int64_t r = 0; r < n; ++r)
      for (int64_t k = 0; k < 64; ++k) {
        const double a = x.get((h * n + r) * 64 + k);
        for (int64_t j = 0; j < 64; ++j)
          out[static_cast<size_t>(((h / group) * 64 + r % 64) * 64 + j)] += a * w.get(k * 64 + j);
      }
  return out;
}

} // namespace kiln_test
