// The interpreter: runs any kernel over its whole grid on the CPU with the GPU path's numeric rules
// (f16/bf16 round on cast and store, f32 accumulation in dot, masked lanes take `other`, padding at
// boundaries). It is kiln's semantics: generated code is checked against it.
#pragma once

#include "dsl/host_buffer.h"
#include "dsl/ir.h"
#include "dsl/registry.h"

#include <llvm/ADT/ArrayRef.h>

#include <cstdint>

namespace kiln {

// One kernel argument for the interpreter: a host buffer for a pointer parameter, or a scalar.
struct InterpArg {
  HostBuffer* buffer = nullptr;
  int64_t i = 0;
  double f = 0;

  static InterpArg ptr(HostBuffer& b) { return InterpArg{&b, 0, 0}; }
  static InterpArg of_int(int64_t v) { return InterpArg{nullptr, v, static_cast<double>(v)}; }
  static InterpArg of_float(double v) { return InterpArg{nullptr, static_cast<int64_t>(v), v}; }
};

// Runs `k` for every program in `grid`, one after another (program id x fastest, then y, then z).
// Arguments follow k.params in order; a wrong count or kind is an Error naming the parameter. An
// access outside a buffer through an unmasked pointer is an Error naming the op's call site, the
// buffer and the index; nothing is written past a buffer. Numeric rules the code generator follows (those of
// one element, scalar arithmetic, comparisons and casts, are implemented once in dsl/scalar_eval.h):
// - every result is rounded to its dtype; dot accumulates in f32 (f64 for f64) in k order from acc,
//   f32 operands through fmaf (or rounded to tf32 first when asked);
// - max/min (elementwise maximum/minimum, the max/min reductions and scans) ignore NaN unless every operand
//   is NaN, like CUDA's fmaxf/fminf; argmax skips NaN too (index 0 when all are NaN);
// - sums accumulate in double and round once to the result dtype (a scan rounds each prefix once;
//   dsl/reduce_eval.h); fma rounds once (fmaf in f32, f16/bf16 then round to their dtype);
// - float -> int truncates toward zero through i64 (saturating, NaN -> 0), then wraps to the width;
//   anything -> i1 is `x != 0`; integer / and % truncate like C, and a zero divisor is an Error.
void interpret(const Kernel& k, const Grid& grid, llvm::ArrayRef<InterpArg> args);

// Whether KILN_INTERPRET=1 (or true, on, yes) asks for the interpreter even where a GPU exists; 0, false, off, no
// or unset do not, and any other value is a kiln::Error naming the variable.
bool interpret_requested();

} // namespace kiln
