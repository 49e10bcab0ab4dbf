// The DSL kernel the rand/randn tests run (interp, codegen, GPU): each program draws a 256-element tile of
// uniform and of normal numbers at offsets `base + program * 256 + i`, and one uniform scalar at offset
// `program` (the scalar path).
//   u[program * 256 + i] = rand(seed, base + program * 256 + i), n[...] = randn(seed, ...), s[program] =
//   rand(seed, program). Args: u, n, s (f32), seed (i64), base (i64).
#pragma once

#include "dsl/dsl.h"

namespace kiln_test {

inline constexpr int64_t kRandomTile = 256;

inline kiln::Kernel random_kernel() {
  using namespace kiln;
  KernelBuilder kb("random_numbers");
  Value u = kb.arg_ptr("u", f32), n = kb.arg_ptr("n", f32), s = kb.arg_ptr("s", f32);
  Value seed = kb.arg("seed", i64), base = kb.arg("base", i64);
  Value index = program_id(0) * kRandomTile + arange(0, kRandomTile); // i32
  Value offsets = base + index.to(i64);
  store(u + index, kiln::rand(seed, offsets));
  store(n + index, kiln::randn(seed, offsets));
  store(s + program_id(0), kiln::rand(seed, program_id(0)));
  return kb.finish();
}

} // namespace kiln_test
