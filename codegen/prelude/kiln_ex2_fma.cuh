// ---- 2^x on the FMA pipe --------------------------------------------------------------------------------
// ex2.approx runs on the SM's multi-function unit, 16 results a clock an SM against 128 fused multiply-adds. In a
// D = 64 attention step there are as many exponentials as the tensor cores' products take clocks, so
// FlashAttention-4 computes some of a tile's exponentials with a polynomial on the FMA pipe instead. This is
// kiln's: 2^x = 2^(j - 1) * 2 * (1 + f * E(f)), j = x rounded to the nearest integer (by adding 1.5 * 2^23,
// which leaves j in the low mantissa bits), f = x - j in [-0.5, 0.5], E of degree 4 (kiln's own weighted minimax
// fit, scripts/fit_prelude_polynomials.cpp; its coefficients here are doubled, exactly, to hold the factor 2),
// 2^(j - 1) added to the exponent bits by an integer shift and add (j - 1, so that j = 128 does not overflow
// them). 16 arithmetic PTX instructions (nvcc -ptx) and no MUFU: the ranges are handled by selects. Error: at most
// 2.03 f32 steps from 2^x for x in [-125, 128) (tests/unit/ex2_fma_prelude_test.cpp sweeps it on the host;
// ex2.approx documents 2), and 2^j is exact at every integer j, so 2^0 is exactly 1. Like ex2.approx.ftz it gives
// +inf from 128 up and NaN for NaN, and 0 for -inf; it gives 0 below -125 as well, where ex2.approx.ftz
// gives 2^x down to 2^-126 (at most 3e-38). EXP2_ON_FMA (codegen/plan_exp2_on_fma.h) chooses which registers of
// a tile take it.
// One text, two compilers: kernels get it as device code after the prelude; the host test includes it as C++,
// defining KILN_EX2_FMA_FN, KILN_F32_BITS and KILN_BITS_F32 first.
#ifndef KILN_EX2_FMA_FN
#define KILN_EX2_FMA_FN __device__ __forceinline__
#define KILN_F32_BITS(x) __float_as_int(x)
#define KILN_BITS_F32(x) __int_as_float(x)
#endif
namespace kiln {
KILN_EX2_FMA_FN float ex2_fma(float x) {
  const float xc = fminf(x, 128.0f); // the low end and NaN are selected below
  const float t = xc + 12582912.0f;  // 1.5 * 2^23: the sum's last mantissa bits hold j, rounded to nearest
  const float f = xc - (t - 12582912.0f);
  float e = 2.652945463e-03f;
  e = fmaf(e, f, 1.934302598e-02f);
  e = fmaf(e, f, 1.110146716e-01f);
  e = fmaf(e, f, 4.804448485e-01f);
  e = fmaf(e, f, 1.386294007e+00f);
  e = fmaf(e, f, 2.0f); // 2 * 2^f, in [1.41, 2.83]
  // t's bits are 0x4B400000 + j, whose upper bits shift out: ((bits - 1) << 23) is (j - 1) << 23. Unsigned, so
  // that the wrapping sums of inputs selected away below (x < -125, NaN) are defined.
  const unsigned j_bits = (static_cast<unsigned>(KILN_F32_BITS(t)) - 1u) << 23;
  const unsigned bits = static_cast<unsigned>(KILN_F32_BITS(e)) + j_bits;
  const float r = KILN_BITS_F32(static_cast<int>(bits));
  return x < -125.0f ? 0.0f : (x == x ? r : x);
}
} // namespace kiln
