namespace kiln {
// ---- Ping-pong between consumer warpgroups (added to kernels whose warpgroups take turns) ---------
// Arrive at named barrier `id` without waiting: with named_barrier_sync (the warp-specialisation prelude), the
// turn one warpgroup passes to the next (`threads` counts the arriving and the waiting warpgroup).
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
// An empty asm that reads and writes every register of `x`: the compiler must have computed them before it, and
// cannot move their computation past a later barrier. Placed before a turn is taken, so that the work feeding
// the product (FA2's softmax and the rescale of O) is done before the wait, not sunk into the turn.
template <int N> __device__ __forceinline__ void fence_registers(float (&x)[N]) {
#pragma unroll
  for (int i = 0; i < N; ++i)
    asm volatile("" : "+f"(x[i])::"memory");
}
template <int N, class T> __device__ __forceinline__ void fence_registers(T (&x)[N]) { // f16, bf16: raw bits
#pragma unroll
  for (int i = 0; i < N; ++i)
    asm volatile("" : "+h"(x[i].bits)::"memory");
}
} // namespace kiln
