// Random attention problems for the differential suites (the interpreter in CI, the GPU through the public API):
// shapes, dtypes, causal modes, layouts, GQA, the K variant, the softmax scale and the input range all drawn
// from one seeded generator, so a failing problem is reproduced by its index and printed by its name.
//
// A problem is drawn in two steps: first its kernel variant (the parameters that select a compiled kernel:
// dtype, tf32, HEAD_DIM, EVEN_D, CAUSAL, K_TRANSPOSED), then a shape that variant runs. A GPU suite draws its
// problems from a small pool of variants so that hundreds of problems need a few dozen compiles.
#pragma once

#include "interp/attention_test_cases.h"

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace kiln::testing_support {

struct AttentionVariant {
  DType dtype = DType::f16;
  bool tf32 = false;
  int64_t head_dim_tile = 64; // HEAD_DIM: a power of two, 16 ... 256
  bool even_d = true;         // D == HEAD_DIM
  int causal = 0;
  bool k_transposed = true;
};

struct RandomAttentionLimits {
  int64_t max_n = 160;            // N_Q and N_K are drawn from [1, max_n]
  int64_t max_head_dim_tile = 128; // HEAD_DIM up to this power of two
  int64_t max_batch = 2;
  int64_t max_kv_heads = 2;
  int64_t max_group = 3; // query heads per KV head
  bool f32_exact = true; // whether f32 without tf32 may be drawn (its kernels compile slowest)
  // f32 exact only up to this HEAD_DIM (the widest f32 kernels take the longest to compile and interpret).
  int64_t max_f32_exact_head_dim_tile = 256;
};

inline int64_t draw(std::mt19937_64& rng, int64_t lo, int64_t hi) { // uniform in [lo, hi]
  return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
}

inline AttentionVariant random_attention_variant(std::mt19937_64& rng, const RandomAttentionLimits& lim) {
  AttentionVariant v;
  const int64_t roll = draw(rng, 0, 99); // f16 40 %, bf16 30 %, f32 with tf32 15 %, exact f32 15 %
  v.dtype = roll < 40 ? DType::f16 : roll < 70 ? DType::bf16 : DType::f32;
  v.tf32 = v.dtype == DType::f32 && (roll < 85 || !lim.f32_exact);
  std::vector<int64_t> tiles;
  for (int64_t t = 16; t <= lim.max_head_dim_tile; t *= 2)
    if (!(v.dtype == DType::f32 && !v.tf32 && t > lim.max_f32_exact_head_dim_tile))
      tiles.push_back(t);
  v.head_dim_tile = tiles[static_cast<size_t>(draw(rng, 0, static_cast<int64_t>(tiles.size()) - 1))];
  v.even_d = draw(rng, 0, 1) == 1;
  v.causal = static_cast<int>(draw(rng, 0, 2));
  v.k_transposed = draw(rng, 0, 1) == 1;
  return v;
}

// A problem the variant runs, with interpreter-sized tiles (BLOCK_M, BLOCK_N in {16, 32, 64}).
inline AttentionCase random_attention_case(std::mt19937_64& rng, const AttentionVariant& v,
                                           const RandomAttentionLimits& lim) {
  AttentionCase c;
  AttentionProblem& p = c.problem;
  p.dtype = v.dtype;
  p.tf32 = v.tf32;
  p.causal = v.causal;
  p.k_transposed = v.k_transposed;
  p.bshd_layout = draw(rng, 0, 1) == 1;
  // D is a multiple of 8 (rows are 16-byte vectors); HEAD_DIM is the power of two >= max(D, 16), so an uneven
  // D lies in (HEAD_DIM / 2, HEAD_DIM), or is 8 for HEAD_DIM = 16.
  if (v.even_d)
    p.D = v.head_dim_tile;
  else if (v.head_dim_tile == 16)
    p.D = 8;
  else
    p.D = 8 * draw(rng, v.head_dim_tile / 16 + 1, v.head_dim_tile / 8 - 1);
  // Sequence lengths: a quarter of them short (1 ... 20: single rows, tails shorter than a tile).
  auto length = [&] { return draw(rng, 0, 3) == 0 ? draw(rng, 1, 20) : draw(rng, 1, lim.max_n); };
  p.N_Q = length();
  p.N_K = draw(rng, 0, 4) == 0 ? p.N_Q : length();
  p.B = draw(rng, 1, lim.max_batch);
  p.H_KV = draw(rng, 1, lim.max_kv_heads);
  p.H = p.H_KV * draw(rng, 1, lim.max_group);
  if (draw(rng, 0, 4) == 0) // a fifth of them with a scale other than 1 / sqrt(D)
    p.sm_scale = 0.05 + 0.95 * std::uniform_real_distribution<double>(0, 1)(rng);
  const int64_t range = draw(rng, 0, 9); // inputs in ±1 mostly, ±4 and ±30 (scores in the hundreds) too
  c.input_scale = range < 7 ? 1.0 : range < 9 ? 4.0 : 30.0;
  const int64_t tiles[] = {16, 32, 64};
  c.block_m = tiles[draw(rng, 0, 2)];
  c.block_n = tiles[draw(rng, 0, 2)];
  return c;
}

inline std::string variant_name(const AttentionVariant& v) {
  static const char* causal[] = {"none", "TL", "BR"};
  return std::string(dtype_name(v.dtype)) + (v.tf32 ? "tf32" : "") + "_hd" + std::to_string(v.head_dim_tile) +
         (v.even_d ? "_even" : "_uneven") + "_causal" + causal[v.causal] + (v.k_transposed ? "_kT" : "_kRow");
}

// The seed of a problem's inputs, from the suite's seed and the problem's index.
inline uint64_t random_case_input_seed(uint64_t suite_seed, int64_t index) {
  return suite_seed * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(index) * 0xbf58476d1ce4e5b9ull + 1;
}

} // namespace kiln::testing_support
