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
// stmatrix.sync.aligned.m8n8.xN[.trans].shared.b16 (sm_90): the inverse of ldmatrix. Lane l gives r[i] of matrix i
// (row l/4, elements 2(l%4) and 2(l%4)+1, low half first; .trans: column l/4, rows 2(l%4) and 2(l%4)+1) and lanes
// 8i..8i+7 the addresses of rows 0..7 of matrix i (16 contiguous bytes each; with x1 / x2 the other lanes' addresses
// are not read). Stages an operand for wgmma's reads in one instruction per 4 matrices (codegen/stmatrix_store.h).
template <bool TRANS> __device__ __forceinline__ void stmatrix_x4(u32 addr, u32 r0, u32 r1, u32 r2, u32 r3) {
  if constexpr (TRANS)
    asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(r0),
                 "r"(r1), "r"(r2), "r"(r3) : "memory");
  else
    asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};" ::"r"(addr), "r"(r0), "r"(r1),
                 "r"(r2), "r"(r3) : "memory");
}
template <bool TRANS> __device__ __forceinline__ void stmatrix_x2(u32 addr, u32 r0, u32 r1) {
  if constexpr (TRANS)
    asm volatile("stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [%0], {%1, %2};" ::"r"(addr), "r"(r0), "r"(r1)
                 : "memory");
  else
    asm volatile("stmatrix.sync.aligned.m8n8.x2.shared.b16 [%0], {%1, %2};" ::"r"(addr), "r"(r0), "r"(r1) : "memory");
}
template <bool TRANS> __device__ __forceinline__ void stmatrix_x1(u32 addr, u32 r0) {
  if constexpr (TRANS)
    asm volatile("stmatrix.sync.aligned.m8n8.x1.trans.shared.b16 [%0], {%1};" ::"r"(addr), "r"(r0) : "memory");
  else
    asm volatile("stmatrix.sync.aligned.m8n8.x1.shared.b16 [%0], {%1};" ::"r"(addr), "r"(r0) : "memory");
}
// A shared-memory matrix descriptor: start address, leading and stride byte offsets (all in 16-byte
// units), swizzle mode in the top two bits; base offset 0 (tiles are 1024-byte aligned).
__device__ __forceinline__ u64 wgmma_desc(u32 addr, u32 lbo, u32 sbo, u32 mode) {
  return static_cast<u64>((addr & 0x3FFFF) >> 4) | (static_cast<u64>(lbo >> 4) << 16) |
         (static_cast<u64>(sbo >> 4) << 32) | (static_cast<u64>(mode) << 62);
}
} // namespace kiln
