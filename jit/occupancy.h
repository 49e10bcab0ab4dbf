// How many CTAs of a compiled kernel one SM holds at once: the least of what its threads, its registers and
// its shared memory allow (the CUDA occupancy rules of sm_80 and newer: registers allocated per warp in
// units of 256, 64K registers and the arch's thread and CTA limits an SM, 1 KiB of shared memory reserved per
// CTA). Heuristics that size a grid in waves (split-KV decoding) need it: a wave is SMs × this, not SMs.
#pragma once

#include "codegen/target.h"
#include "jit/jit_kernel.h"
#include "runtime/device.h"

#include <cstdint>

namespace kiln {

// For `threads` threads a CTA using `registers` registers a thread and `shared_bytes` of shared memory
// (static and dynamic), on an SM of `target` with `shared_per_sm` bytes of shared memory; at least 1 (a
// kernel that does not fit at all fails at launch, not here).
int64_t resident_ctas_per_sm(const Target& target, int64_t threads, int64_t registers, int64_t shared_bytes,
                             int64_t shared_per_sm);

// The same for a kernel compiled for `device` (its ptxas register count, its static and dynamic shared memory).
int64_t resident_ctas_per_sm(const JitKernel& kernel, const rt::DeviceInfo& device);

} // namespace kiln
