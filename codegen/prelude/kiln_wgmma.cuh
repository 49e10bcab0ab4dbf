namespace kiln {
// ---- Hopper warpgroup MMA (generated because this kernel uses wgmma) -----------------------------
// Orders this thread's earlier register and shared-memory accesses before the next wgmma reads them.
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory"); }
// Waits until at most N committed wgmma groups of this warpgroup are in flight.
template <int N> __device__ __forceinline__ void wgmma_wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}
// (fence_proxy_async, which orders shared-memory writes before wgmma's reads, is the main prelude's.)
// A shared-memory matrix descriptor: start address, leading and stride byte offsets (all in 16-byte
// units), swizzle mode in the top two bits; base offset 0 (tiles are 1024-byte aligned).
__device__ __forceinline__ u64 wgmma_desc(u32 addr, u32 lbo, u32 sbo, u32 mode) {
  return static_cast<u64>((addr & 0x3FFFF) >> 4) | (static_cast<u64>(lbo >> 4) << 16) |
         (static_cast<u64>(sbo >> 4) << 32) | (static_cast<u64>(mode) << 62);
}
} // namespace kiln
