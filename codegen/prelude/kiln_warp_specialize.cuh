namespace kiln {
// ---- Warp specialisation (sm_90a) -------------------------------------------------------------------
// A producer warpgroup that only issues copies hands its registers to the consumer warpgroups: setmaxnreg
// must be executed by every warp of a warpgroup, at the head of that warpgroup's branch of one if/else, in a
// kernel whose register count at entry is capped (__launch_bounds__(threads, blocks)). `.inc` blocks until
// the CTA's pool holds the registers, so the counts must balance: what the producer releases, the
// consumers take.
template <int N> __device__ __forceinline__ void setmaxnreg_dec() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" ::"n"(N));
}
template <int N> __device__ __forceinline__ void setmaxnreg_inc() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" ::"n"(N));
}
// A barrier among the first `threads` threads only (named barrier `id`; 0 is __syncthreads'): the consumers'
// barrier, which the producer warpgroup never joins.
__device__ __forceinline__ void named_barrier_sync(int id, int threads) {
  asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
} // namespace kiln
