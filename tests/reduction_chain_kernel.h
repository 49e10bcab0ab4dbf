// The reduction-slot tests' kernel (codegen and GPU): cross-warp reductions one after another, in a loop, in
// both branches of an if and after it, so that the code generator's scratch bookkeeping (LoweringPlan::
// reduction_slots; Emitter::emit_reduce skipping a leading barrier) is exercised in each place it decides.
// 16 warps share a (2, 1024) tile along its columns, so every reduction along axis 1 combines the warps' partial
// results through shared memory.
#pragma once

#include "dsl/dsl.h"

namespace kiln_test {

// Arguments: x (f32, n_rows x 1024, row-major), out (f32, n_rows x 8), n_rows (i32), flip (i32). One program
// walks every pair of rows. For each row r, with mean = sum(x_r) / 1024 and c = x_r - mean:
//   out[r, 0] = sum(x_r)        out[r, 1] = max(c)          out[r, 2] = sum(c * c)     out[r, 3] = min(x_r)
//   out[r, 4] = sum(|c|) when flip != 0, else max(|c|)      out[r, 5] = argmax(x_r) (as a float)
//   out[r, 6] = sum(x_r * x_r) when `stores_in_loop`, else 0;  out[r, 7] = 1 (a marker the loop writes)
// `stores_in_loop` false keeps every store after the loop, accumulating the loop's results in registers: the
// loop then has no barrier of its own at its top, and its first reduction must start with one.
inline kiln::Kernel reduction_chain_kernel(bool stores_in_loop) {
  using namespace kiln;
  Config config;
  config.num_warps = 16;
  config.num_stages = 1;
  KernelBuilder kb(stores_in_loop ? "reduction_chain" : "reduction_chain_registers", config);
  Value x = kb.arg_ptr("x", f32), out = kb.arg_ptr("out", f32);
  Value n_rows = kb.arg("n_rows", i32), flip = kb.arg("flip", i32);
  Value cols = arange(0, 1024), rows = arange(0, 2), slots = arange(0, 8);
  auto put = [&](const Value& row0, int column, const Value& v) { // v: (2,) f32, one per row of the pair
    Value r = row0 + rows;
    store(out + r * 8 + column, v, r < n_rows);
  };
  Value total = zeros({2}, f32);
  for_range(0, n_rows, 2, [&](Value row0) {
    Value r = expand_dims(row0 + rows, 1);                                   // (2, 1)
    Value xs = load(x + r * 1024 + expand_dims(cols, 0), r < n_rows, 0.0f);  // (2, 1024)
    Value s = sum(xs, 1);
    Value c = xs - expand_dims(s / 1024.0f, 1);
    Value mx = max(c, 1);
    Value ss = sum(c * c, 1);
    Value mn = min(xs, 1);
    Value branch = zeros({2}, f32);
    if_(
        flip != 0, [&] { branch = sum(abs(c), 1); }, [&] { branch = max(abs(c), 1); });
    Value am = argmax(xs, 1).to(f32);
    if (stores_in_loop) {
      put(row0, 0, s), put(row0, 1, mx), put(row0, 2, ss), put(row0, 3, mn), put(row0, 4, branch);
      put(row0, 5, am), put(row0, 6, sum(xs * xs, 1)), put(row0, 7, full({2}, 1.0, f32));
    } else {
      total = total + s + mx + ss + mn + branch + am;
    }
  });
  if (!stores_in_loop)
    store(out + slots, where(slots == 0, sum(total, 0), 0.0f), slots < 8);
  return kb.finish();
}

} // namespace kiln_test
