namespace kiln {
// ---- Hopper tensor memory accelerator (TMA) and mbarriers (sm_90+) ------------------------------
// A tensor map is the driver's 128-byte, 64-byte-aligned description of a global tensor and the box a
// copy moves (runtime/tensor_map.h builds it on the host). Kernels take it as a `const __grid_constant__
// kiln::TensorMap` parameter, so it lives in parameter memory and its generic address is valid for TMA.
struct alignas(64) TensorMap {
  u64 opaque[16];
};

// An mbarrier is a 64-bit shared-memory word counting expected arrivals and expected transaction bytes;
// each time both reach zero its phase flips. Every function below takes its 32-bit shared address
// (smem_u32). One thread initialises it with the arrivals a phase needs; before anyone else uses it the
// initialisation must be made visible (mbarrier_init_fence, then a CTA barrier).
__device__ __forceinline__ void mbarrier_init(u32 bar, u32 arrivals) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(bar), "r"(arrivals) : "memory");
}
__device__ __forceinline__ void mbarrier_init_fence() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
// Arrives once and announces `bytes` more transaction bytes for the current phase: the producer's half of
// a TMA copy, issued by the thread that issues the copy.
__device__ __forceinline__ void mbarrier_arrive_expect_tx(u32 bar, u32 bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(bar), "r"(bytes) : "memory");
}
// Arrives once (a consumer releasing a slot of a ring to the producer).
__device__ __forceinline__ void mbarrier_arrive(u32 bar) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(bar) : "memory");
}
// Waits until the phase of parity `parity` has completed. try_wait suspends the thread for a
// hardware-chosen time before it answers, so the loop does not spin hot.
__device__ __forceinline__ void mbarrier_wait(u32 bar, u32 parity) {
  u32 done = 0;
  do {
    asm volatile("{\n\t.reg .pred p;\n\tmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\n\t"
                 "selp.u32 %0, 1, 0, p;\n\t}"
                 : "=r"(done)
                 : "r"(bar), "r"(parity)
                 : "memory");
  } while (!done);
}

// Fetches a tensor map into the TMA unit's cache ahead of its first copy.
__device__ __forceinline__ void tma_prefetch_map(const TensorMap* map) {
  asm volatile("prefetch.tensormap [%0];" ::"l"(reinterpret_cast<u64>(map)) : "memory");
}

// Copies the box of `map` whose first element has coordinates (c0 innermost, c1, ...) into shared memory
// at `dst` (128-byte aligned; 1024 with a 128-byte swizzle), completing `bar`'s transaction bytes when it
// lands. Elements outside the tensor are filled by the hardware (zero, or NaN where the map asks for it).
__device__ __forceinline__ void tma_load_2d(u32 dst, const TensorMap* map, int c0, int c1, u32 bar) {
  asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3}], [%4];" ::"r"(dst),
               "l"(reinterpret_cast<u64>(map)), "r"(c0), "r"(c1), "r"(bar)
               : "memory");
}
__device__ __forceinline__ void tma_load_3d(u32 dst, const TensorMap* map, int c0, int c1, int c2, u32 bar) {
  asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3, %4}], [%5];" ::"r"(dst),
               "l"(reinterpret_cast<u64>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar)
               : "memory");
}
__device__ __forceinline__ void tma_load_4d(u32 dst, const TensorMap* map, int c0, int c1, int c2, int c3, u32 bar) {
  asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3, %4, %5}], [%6];" ::"r"(dst),
               "l"(reinterpret_cast<u64>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(bar)
               : "memory");
}
__device__ __forceinline__ void tma_load_5d(u32 dst, const TensorMap* map, int c0, int c1, int c2, int c3, int c4,
                                            u32 bar) {
  asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
               " [%0], [%1, {%2, %3, %4, %5, %6}], [%7];" ::"r"(dst),
               "l"(reinterpret_cast<u64>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4), "r"(bar)
               : "memory");
}

// Stores a shared-memory box to the tensor (elements outside it are not written). The threads that wrote
// the box must first make their writes visible to the async proxy (fence.proxy.async.shared::cta, then a
// barrier); the store is tracked by bulk groups, not by an mbarrier.
__device__ __forceinline__ void tma_store_2d(const TensorMap* map, int c0, int c1, u32 src) {
  asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%0, {%1, %2}], [%3];" ::"l"(
                   reinterpret_cast<u64>(map)),
               "r"(c0), "r"(c1), "r"(src)
               : "memory");
}
__device__ __forceinline__ void tma_store_3d(const TensorMap* map, int c0, int c1, int c2, u32 src) {
  asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.tile.bulk_group [%0, {%1, %2, %3}], [%4];" ::"l"(
                   reinterpret_cast<u64>(map)),
               "r"(c0), "r"(c1), "r"(c2), "r"(src)
               : "memory");
}
__device__ __forceinline__ void tma_store_4d(const TensorMap* map, int c0, int c1, int c2, int c3, u32 src) {
  asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.tile.bulk_group [%0, {%1, %2, %3, %4}], [%5];" ::"l"(
                   reinterpret_cast<u64>(map)),
               "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(src)
               : "memory");
}
__device__ __forceinline__ void tma_store_5d(const TensorMap* map, int c0, int c1, int c2, int c3, int c4, u32 src) {
  asm volatile("cp.async.bulk.tensor.5d.global.shared::cta.tile.bulk_group [%0, {%1, %2, %3, %4, %5}], [%6];" ::"l"(
                   reinterpret_cast<u64>(map)),
               "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4), "r"(src)
               : "memory");
}

// Adds a shared-memory box to the tensor, element by element (.add; f32 here, the map's type; elements outside
// the tensor are not touched). As for a TMA store: the writers fence for the async proxy and meet at a barrier
// first, and bulk groups track it.
__device__ __forceinline__ void tma_reduce_add_2d(const TensorMap* map, int c0, int c1, u32 src) {
  asm volatile("cp.reduce.async.bulk.tensor.2d.global.shared::cta.add.tile.bulk_group [%0, {%1, %2}], [%3];" ::"l"(
                   reinterpret_cast<u64>(map)),
               "r"(c0), "r"(c1), "r"(src)
               : "memory");
}
__device__ __forceinline__ void tma_reduce_add_3d(const TensorMap* map, int c0, int c1, int c2, u32 src) {
  asm volatile("cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.tile.bulk_group [%0, {%1, %2, %3}], [%4];" ::
                   "l"(reinterpret_cast<u64>(map)),
               "r"(c0), "r"(c1), "r"(c2), "r"(src)
               : "memory");
}
__device__ __forceinline__ void tma_reduce_add_4d(const TensorMap* map, int c0, int c1, int c2, int c3, u32 src) {
  asm volatile(
      "cp.reduce.async.bulk.tensor.4d.global.shared::cta.add.tile.bulk_group [%0, {%1, %2, %3, %4}], [%5];" ::"l"(
          reinterpret_cast<u64>(map)),
      "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(src)
      : "memory");
}
__device__ __forceinline__ void tma_reduce_add_5d(const TensorMap* map, int c0, int c1, int c2, int c3, int c4,
                                                  u32 src) {
  asm volatile(
      "cp.reduce.async.bulk.tensor.5d.global.shared::cta.add.tile.bulk_group [%0, {%1, %2, %3, %4, %5}], [%6];" ::"l"(
          reinterpret_cast<u64>(map)),
      "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4), "r"(src)
      : "memory");
}
// (bulk_commit, bulk_wait_read and bulk_wait are the main prelude's: bulk reductions use them too.)
} // namespace kiln
