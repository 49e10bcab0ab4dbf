// Benchmark data movement between host and device: fast deterministic random fills of host buffers
// (hundreds of millions of elements per sweep, so one splitmix64 step and one rounding per element),
// uploads, NaN-poisoned device outputs and downloads.
#pragma once

#include "dsl/host_buffer.h"
#include "runtime/device.h"

#include <cstdint>
#include <string>

namespace kiln::bench {

// Every element uniformly random in [-scale, scale], rounded to the buffer's float dtype; the same seed
// gives the same contents. A kiln::Error for integer buffers.
void fill_uniform(HostBuffer& b, uint64_t seed, double scale);

rt::DeviceBuffer upload(const HostBuffer& b);
// A device buffer of `numel` elements of `t` with every byte 0xFF: NaN in f16, bf16, f32 and f64, so an
// element the kernel never writes fails the check.
rt::DeviceBuffer poisoned_device_buffer(DType t, int64_t numel);
HostBuffer download(const rt::DeviceBuffer& d, DType t, int64_t numel, std::string name);

} // namespace kiln::bench
