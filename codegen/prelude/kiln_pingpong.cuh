namespace kiln {
// ---- Ping-pong between consumer warpgroups (added to kernels whose warpgroups take turns) ---------
// Arrive at named barrier `id` without waiting: with named_barrier_sync (the warp-specialisation prelude), the
// turn one warpgroup passes to the next (`threads` counts the arriving and the waiting warpgroup).
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
} // namespace kiln
