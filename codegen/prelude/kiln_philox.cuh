// ---- Counter-based random numbers: Philox4x32-10 (Salmon, Moraes, Dror, Shaw: "Parallel random numbers:
// as easy as 1, 2, 3", SC'11) ---------------------------------------------------------------------------
// One text, two compilers: generated kernels that call rand/randn get it as device code, and the interpreter
// includes this file as host C++ (defining KILN_PHILOX_FN first), so both compute the same numbers for the
// same (seed, offset). Pure integer arithmetic except randn's last step, which is done in double on both.
#ifndef KILN_PHILOX_FN
#define KILN_PHILOX_FN __device__ __forceinline__
#endif
namespace kiln {
struct PhiloxBlock {
  unsigned int x0, x1, x2, x3;
};
// Ten rounds of Philox4x32 on counter (c0, c1, c2, c3) with key (k0, k1).
KILN_PHILOX_FN PhiloxBlock philox4x32_10(unsigned int c0, unsigned int c1, unsigned int c2, unsigned int c3,
                                          unsigned int k0, unsigned int k1) {
  for (int round = 0; round < 10; ++round) {
    const unsigned long long p0 = 0xD2511F53ull * c0, p1 = 0xCD9E8D57ull * c2;
    const unsigned int hi0 = (unsigned int)(p0 >> 32), lo0 = (unsigned int)p0;
    const unsigned int hi1 = (unsigned int)(p1 >> 32), lo1 = (unsigned int)p1;
    const unsigned int n0 = hi1 ^ c1 ^ k0, n2 = hi0 ^ c3 ^ k1;
    c0 = n0;
    c1 = lo1;
    c2 = n2;
    c3 = lo0;
    k0 += 0x9E3779B9u;
    k1 += 0xBB67AE85u;
  }
  PhiloxBlock b = {c0, c1, c2, c3};
  return b;
}
// The block for element `offset` under `seed`: counter (offset's low and high words, 0, 0), key (seed's low and
// high words).
KILN_PHILOX_FN PhiloxBlock philox_block(long long seed, long long offset) {
  const unsigned long long s = (unsigned long long)seed, o = (unsigned long long)offset;
  return philox4x32_10((unsigned int)o, (unsigned int)(o >> 32), 0u, 0u, (unsigned int)s, (unsigned int)(s >> 32));
}
// Uniform in [0, 1): the top 24 bits of the block's first word, times 2^-24 (every value exact in f32).
KILN_PHILOX_FN float philox_uniform(long long seed, long long offset) {
  return (float)(philox_block(seed, offset).x0 >> 8) * 5.9604644775390625e-08f;
}
// Standard normal by Box-Muller on the first two words: u1 in (0, 1], u2 in [0, 1); computed in double and
// rounded once to f32.
KILN_PHILOX_FN float philox_normal(long long seed, long long offset) {
  const PhiloxBlock b = philox_block(seed, offset);
  const double u1 = ((double)(b.x0 >> 8) + 1.0) * 5.9604644775390625e-08;
  const double u2 = (double)(b.x1 >> 8) * 5.9604644775390625e-08;
  return (float)(::sqrt(-2.0 * ::log(u1)) * ::cos(6.283185307179586476925 * u2));
}
} // namespace kiln
