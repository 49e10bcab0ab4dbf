namespace kiln {
// ---- Turns between consumer warpgroups (added to kernels whose warpgroups, or programs, take turns) ---------
// Arrive at named barrier `id` without waiting: with named_barrier_sync (the warp-specialisation prelude), the
// turn one warpgroup (or one program's warps) passes to the next (`threads` counts the arriving and the waiting
// threads). Like bar.sync, the barrier's completion makes this thread's earlier memory accesses visible to the
// threads that wait at it.
__device__ __forceinline__ void named_barrier_arrive(int id, int threads) {
  asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(threads) : "memory");
}
} // namespace kiln
