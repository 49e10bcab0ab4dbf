#include "bench/device_peaks.h"

namespace kiln::bench {

DevicePeaks nominal_peaks(const rt::DeviceInfo& d) {
  // Dense f16 MMA FLOPs per SM per clock (an FMA is 2): Hopper 4096, A100 2048, GA10x/AD10x 512 (f32
  // accumulate).
  const int cc = d.cc_major * 10 + d.cc_minor;
  const double per_sm_clock = cc >= 90 ? 4096 : cc == 80 ? 2048 : 512;
  DevicePeaks p;
  p.tflops = per_sm_clock * d.sm_count * d.clock_khz * 1e3 / 1e12;
  // Double data rate: two transfers per memory clock over the whole bus.
  p.gbps = 2.0 * d.memory_clock_khz * 1e3 * (d.memory_bus_bits / 8.0) / 1e9;
  p.from = d.name;
  return p;
}

} // namespace kiln::bench
