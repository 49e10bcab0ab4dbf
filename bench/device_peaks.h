// The device's nominal peak rates, for the performance model's roofline: the dense f16 tensor-core rate
// from the SM count, the SM clock and the architecture's MMA throughput per SM, and the DRAM bandwidth
// from the memory clock and bus width. (tools/model_command.cpp derives the same figures for `kiln model`;
// report.py also rates the model against the ceilings the peers measure in the same run.)
#pragma once

#include "runtime/device.h"

#include <string>

namespace kiln::bench {

struct DevicePeaks {
  double tflops = 0; // dense f16 tensor-core FLOP/s, 10^12
  double gbps = 0;   // DRAM bytes/s, 10^9
  std::string from;  // the device's name
};

DevicePeaks nominal_peaks(const rt::DeviceInfo& d);

} // namespace kiln::bench
