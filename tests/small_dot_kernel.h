// The kernel the small-dot tests run (interp, codegen, GPU): C (M, N) = A (M, K) @ B (K, N) in one program, every
// matrix row-major and loaded through pointer tiles, with M, N or K below the tensor cores' 16 (such dots lower to
// FMA, codegen/choose_dot_lowering.h). With `beside_mma`, the same kernel also computes a 64 x 64 x 32 f16 product
// into D (tensor cores), so that a small dot and an mma dot share one warp split.
#pragma once

#include "dsl/dsl.h"

#include <ostream>
#include <string>

namespace kiln_test {

struct SmallDot {
  int64_t M, N, K;
  kiln::DType dtype;
};

// "M4_N4_K8_f32": the case's name in test listings (ctest shows it instead of the struct's bytes).
inline std::string label(const SmallDot& d) {
  return "M" + std::to_string(d.M) + "_N" + std::to_string(d.N) + "_K" + std::to_string(d.K) + "_" +
         std::string(kiln::dtype_name(d.dtype));
}
inline void PrintTo(const SmallDot& d, std::ostream* os) { *os << label(d); }

inline kiln::Kernel small_dot_kernel(const SmallDot& d, bool beside_mma = false) {
  using namespace kiln;
  KernelBuilder kb("small_dot");
  Value a = kb.arg_ptr("a", d.dtype), b = kb.arg_ptr("b", d.dtype);
  Value c = kb.arg_ptr("c", d.dtype == DType::f64 ? f64 : f32);
  auto tile = [](const Value& base, int64_t rows, int64_t cols) {
    return load(base + arange(0, rows).expand_dims(1) * cols + arange(0, cols).expand_dims(0));
  };
  Value product = dot(tile(a, d.M, d.K), tile(b, d.K, d.N));
  store(c + arange(0, d.M).expand_dims(1) * d.N + arange(0, d.N).expand_dims(0), product);
  if (beside_mma) {
    Value x = kb.arg_ptr("x", f16), y = kb.arg_ptr("y", f16), z = kb.arg_ptr("z", f32);
    Value big = dot(tile(x, 64, 32), tile(y, 32, 64));
    store(z + arange(0, 64).expand_dims(1) * 64 + arange(0, 64).expand_dims(0), big);
  }
  return kb.finish();
}

} // namespace kiln_test
