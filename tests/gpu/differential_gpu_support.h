// What the GPU's differential suites (forward and backward) share: the limits of their random problems, and tensors
// at random padded strides (rows, heads and batches with random padding after each, the padding NaN, so that a
// kernel that reads it poisons its output).
#pragma once

#include "interp/attention_random_cases.h"
#include "kernels/attention/attention_problem.h"

#include <random>

namespace kiln::testing_support {

// The random problems' limits on the GPU: sequences up to 200, HEAD_DIM up to 256, exact f32 up to 64 (its kernels
// are the slowest to compile).
inline RandomAttentionLimits gpu_differential_limits() {
  RandomAttentionLimits lim;
  lim.max_n = 200;
  lim.max_head_dim_tile = 256;
  lim.max_f32_exact_head_dim_tile = 64;
  return lim;
}

// Strides of a [B, heads, n, D] tensor in `p`'s layout with random padding after each row, head and batch (in
// multiples of 8 elements, so that every row stays 16-byte aligned), and the element count the buffer needs.
struct PaddedTensor {
  TensorStrides strides;
  int64_t numel = 0;
};
inline PaddedTensor padded_strides(std::mt19937_64& rng, const AttentionProblem& p, int64_t heads, int64_t n) {
  auto pad = [&] { return draw(rng, 0, 2) == 0 ? 8 * draw(rng, 1, 3) : 0; };
  TensorStrides s;
  if (p.bshd_layout) {
    s.h = p.D + pad();
    s.n = heads * s.h + pad();
    s.b = n * s.n + pad();
  } else {
    s.n = p.D + pad();
    s.h = n * s.n + pad();
    s.b = heads * s.h + pad();
  }
  return {s, (p.B - 1) * s.b + (heads - 1) * s.h + (n - 1) * s.n + p.D};
}

// `packed` (strides `from`) copied into a buffer of `to`'s layout; the padding is NaN.
inline HostBuffer repack(const HostBuffer& packed, const TensorStrides& from, const PaddedTensor& to, int64_t B,
                         int64_t heads, int64_t n, int64_t D) {
  HostBuffer out(packed.dtype, to.numel, packed.name);
  poison(out);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t d = 0; d < D; ++d)
          out.set(element_offset(to.strides, b, h, i, d), packed.get(element_offset(from, b, h, i, d)));
  return out;
}

} // namespace kiln::testing_support
