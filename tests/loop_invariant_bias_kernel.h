// The hoisting tests' kernel (codegen and GPU): a matmul-style loop whose every iteration adds a bias tile made
// before the loop, c = sum over k-steps of (a_k @ b_k + bias) for one (64, 64) tile. The bias row is loaded in
// a blocked layout and read in the loop, through a broadcast, in the accumulator's (mma), so it needs a layout
// conversion; the row is the same in every iteration, so the plan makes that conversion once, before the loop
// (LayoutConversion::hoisted_before), instead of once an iteration.
#pragma once

#include "dsl/dsl.h"

namespace kiln_test {

// Arguments: a (f16, 64 x K, row-major), b (f16, K x 64, row-major), bias (f32, 64), c (f32, 64 x 64), K (i32, a
// multiple of 32). c = a @ b + (K / 32) * bias broadcast over the rows.
inline kiln::Kernel loop_invariant_bias_kernel(int num_stages) {
  using namespace kiln;
  Config config;
  config.num_warps = 4;
  config.num_stages = num_stages;
  KernelBuilder kb("loop_invariant_bias", config);
  Value a = kb.arg_ptr("a", f16), b = kb.arg_ptr("b", f16), bias = kb.arg_ptr("bias", f32);
  Value c = kb.arg_ptr("c", f32);
  Value K = kb.arg("K", i32);
  Value ap = make_block_ptr(a, {64, K}, {K, 1}, {0, 0}, {64, 32}, {1, 0});
  Value bp = make_block_ptr(b, {K, 64}, {64, 1}, {0, 0}, {32, 64}, {1, 0});
  // (64, 64) f32 before the loop: the bias row broadcast (recomputed where the loop reads it).
  Value row = load(bias + arange(0, 64), arange(0, 64) < 64, 0.0f);
  Value tile = expand_dims(row, 0) * full({64, 64}, 1.0, f32) + zeros({64, 64}, f32);
  Value acc = zeros({64, 64}, f32);
  for_range(0, K, 32, [&](Value) {
    Value a_tile = load(ap);
    Value b_tile = load(bp);
    acc = dot(a_tile, b_tile, acc) + tile;
    ap = advance(ap, {0, 32});
    bp = advance(bp, {32, 0});
  });
  store(make_block_ptr(c, {64, 64}, {64, 1}, {0, 0}, {64, 64}, {1, 0}), acc);
  return kb.finish();
}

} // namespace kiln_test
