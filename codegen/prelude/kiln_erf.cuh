// ---- erf for f32 without a branch --------------------------------------------------------------------------
// CUDA's erff picks its polynomial per element with selects but guards its exp2 with a branch, so an epilogue
// that applies erf to a thread's 128 accumulator elements (a fused GELU) is 128 basic blocks in PTX, and ptxas
// spilled it. This version computes both pieces for every element and selects: one block, no spill, and the
// fused GELU at 4096^3 from 610.6 to 666.4 TFLOP/s on an H200 (worklog §54).
//   |x| <  0.9:  erf(x) = x + x * P(x^2),          P of degree 5
//   |x| >= 0.9:  erf(x) = sign(x) * (1 - 2^Q(|x|)), Q of degree 6 approximating log2(erfc(|x|)) on [0.9, 4]
// (|x| clamped to 4, where erf rounds to 1 in f32; the clamp also keeps Q from growing past its interval).
// The coefficients are kiln's own weighted minimax fits (scripts/fit_prelude_polynomials.cpp: Lawson's iteration in long
// double, errors weighted to be relative to erf), rounded to f32. Error: at most 1.3 ulp with an exact 2^x
// (tests/unit/erf_prelude_test.cpp sweeps the f32 line on the host; CUDA documents 2 ulp for erff); the
// device's ex2.approx moves a result by at most one f32 step from that (tests/gpu/erf_gpu_test.cpp). NaN
// stays NaN (it fails |x| >= 0.9 and takes the first piece), +-inf gives +-1, -0 gives -0.
// One text, two compilers: kernels that call erf on f32, f16 or bf16 get it as device code after the prelude,
// and the host test includes it as C++ (defining KILN_ERF_FN and KILN_ERF_EX2 first).
#ifndef KILN_ERF_FN
#define KILN_ERF_FN __device__ __forceinline__
#define KILN_ERF_EX2(x) kiln::ex2(x)
#endif
namespace kiln {
KILN_ERF_FN float erf_f32(float x) {
  const float s = x * x;
  float p = -6.090360112e-04f;
  p = fmaf(p, s, 5.011962727e-03f);
  p = fmaf(p, s, -2.677890845e-02f);
  p = fmaf(p, s, 1.128214076e-01f);
  p = fmaf(p, s, -3.761252463e-01f);
  p = fmaf(p, s, 1.283791512e-01f);
  const float small = fmaf(x, p, x);
  const float t = fminf(fabsf(x), 4.0f);
  float q = 2.859705419e-04f;
  q = fmaf(q, t, -4.422567785e-03f);
  q = fmaf(q, t, 3.219404817e-02f);
  q = fmaf(q, t, -1.502042860e-01f);
  q = fmaf(q, t, -9.189622402e-01f);
  q = fmaf(q, t, -1.627067447e+00f);
  q = fmaf(q, t, -2.401331440e-04f);
  const float large = copysignf(1.0f - KILN_ERF_EX2(q), x);
  return fabsf(x) >= 0.9f ? large : small;
}
} // namespace kiln
