// Timing kernels on the GPU with events: the median over repetitions, optionally with L2 flushed before each,
// so that autotuning and benchmarks compare configurations on equal terms.
#pragma once

#include "runtime/device.h"

#include <functional>
#include <vector>

namespace kiln::rt {

// Owns a buffer larger than the device's L2 cache; flush() overwrites it on a stream, evicting the L2.
class L2Flusher {
public:
  L2Flusher();  // sized from current_device().l2_bytes
  void flush(const Stream& stream);
  size_t bytes() const { return buffer_.bytes(); }

private:
  DeviceBuffer buffer_;
};

struct TimingOptions {
  int warmup = 3;
  int reps = 20;
  bool flush_l2 = false;  // flush before every timed launch (cold-cache timing)
};

// Runs launch(stream) warmup times, then reps times back to back with events recorded around each launch, and
// returns each launch's time in milliseconds, in launch order. Throws kiln::Error when warmup < 0 or reps < 1.
std::vector<double> time_kernel_runs_ms(const std::function<void(Stream&)>& launch, const TimingOptions& options);
// The median of time_kernel_runs_ms.
double time_kernel_ms(const std::function<void(Stream&)>& launch, const TimingOptions& options);
double time_kernel_ms(const std::function<void(Stream&)>& launch, int warmup, int reps);

} // namespace kiln::rt
