namespace kiln {
// ---- Scalars loaded from memory, known warp-uniform (sm_90a) -------------------------------------------
// A DSL scalar is the program's: every thread of a warp loads the same value from the same address. ptxas
// cannot know that of a load, so a loop whose bounds come from memory (a block mask's run of key tiles,
// varlen's sequence lengths) is a possibly divergent path to it, where it may serialise the wgmma inside (ptxas
// C7520: it did over a block mask, worklog §47). The warp's maximum of the loaded value, by `redux.sync`, is that value, and ptxas
// knows a warp reduction is uniform (a lane-0 broadcast by __shfl_sync is not enough: measured, C7520
// stays), so what depends on it is uniform to it, as kernel parameters are. Only where the whole warp runs
// the program (never in a producer thread that issues TMA copies alone). redux.sync takes 32-bit integers:
// wider scalars go as two halves, floats as their bits, narrower integers by promotion to int.
__device__ __forceinline__ unsigned warp_uniform(unsigned v) { return __reduce_max_sync(0xffffffffu, v); }
__device__ __forceinline__ int warp_uniform(int v) { return __reduce_max_sync(0xffffffffu, v); }
__device__ __forceinline__ unsigned long long warp_uniform(unsigned long long v) {
  const unsigned lo = warp_uniform(static_cast<unsigned>(v)), hi = warp_uniform(static_cast<unsigned>(v >> 32));
  return (static_cast<unsigned long long>(hi) << 32) | lo;
}
__device__ __forceinline__ long long warp_uniform(long long v) {
  return static_cast<long long>(warp_uniform(static_cast<unsigned long long>(v)));
}
__device__ __forceinline__ float warp_uniform(float v) { return __uint_as_float(warp_uniform(__float_as_uint(v))); }
__device__ __forceinline__ double warp_uniform(double v) {
  return __longlong_as_double(warp_uniform(__double_as_longlong(v)));
}
__device__ __forceinline__ bool warp_uniform(bool v) { return warp_uniform(unsigned(v)) != 0; }
__device__ __forceinline__ f16 warp_uniform(f16 v) { return f16{static_cast<unsigned short>(warp_uniform(unsigned(v.bits)))}; }
__device__ __forceinline__ bf16 warp_uniform(bf16 v) {
  return bf16{static_cast<unsigned short>(warp_uniform(unsigned(v.bits)))};
}
template <typename T> __device__ __forceinline__ T* warp_uniform(T* p) {
  return reinterpret_cast<T*>(warp_uniform(reinterpret_cast<unsigned long long>(p)));
}
} // namespace kiln
