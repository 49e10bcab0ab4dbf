namespace kiln {
// ---- Scalars loaded from memory, known warp-uniform (sm_90a) -------------------------------------------
// A DSL scalar is the program's: every thread of a warp loads the same value from the same address. ptxas
// cannot know that of a load, so a loop whose bounds come from memory (a block mask's run of key tiles,
// varlen's sequence lengths) is a possibly divergent path to it, and it serialises the wgmma inside (ptxas
// C7520, worklog §47). Lane 0's value broadcast by a full-warp shuffle is uniform by construction: ptxas
// then treats what depends on it as uniform, as it does kernel parameters. Only where the whole warp runs
// the program (never in a producer thread that issues TMA copies alone). Narrower integers take the int
// overload by promotion.
__device__ __forceinline__ int warp_uniform(int v) { return __shfl_sync(0xffffffffu, v, 0); }
__device__ __forceinline__ unsigned warp_uniform(unsigned v) { return __shfl_sync(0xffffffffu, v, 0); }
__device__ __forceinline__ long long warp_uniform(long long v) { return __shfl_sync(0xffffffffu, v, 0); }
__device__ __forceinline__ unsigned long long warp_uniform(unsigned long long v) {
  return __shfl_sync(0xffffffffu, v, 0);
}
__device__ __forceinline__ float warp_uniform(float v) { return __shfl_sync(0xffffffffu, v, 0); }
__device__ __forceinline__ double warp_uniform(double v) { return __shfl_sync(0xffffffffu, v, 0); }
__device__ __forceinline__ bool warp_uniform(bool v) { return __shfl_sync(0xffffffffu, int(v), 0) != 0; }
__device__ __forceinline__ f16 warp_uniform(f16 v) {
  return f16{static_cast<unsigned short>(__shfl_sync(0xffffffffu, unsigned(v.bits), 0))};
}
__device__ __forceinline__ bf16 warp_uniform(bf16 v) {
  return bf16{static_cast<unsigned short>(__shfl_sync(0xffffffffu, unsigned(v.bits), 0))};
}
template <typename T> __device__ __forceinline__ T* warp_uniform(T* p) {
  return reinterpret_cast<T*>(__shfl_sync(0xffffffffu, reinterpret_cast<unsigned long long>(p), 0));
}
} // namespace kiln
