// Event-based kernel timing and L2 flushing.
#include "runtime/timing.h"

#include "support/error.h"
#include "support/median.h"

#include <algorithm>
#include <optional>
#include <vector>

namespace kiln::rt {

namespace {
size_t flush_bytes() {
  // Twice the L2 so that no line of the previous launch survives, whatever the replacement policy.
  int64_t l2 = current_device().l2_bytes;
  return static_cast<size_t>(std::max<int64_t>(2 * l2, 1 << 20));
}
} // namespace

L2Flusher::L2Flusher() : buffer_(flush_bytes()) {}

void L2Flusher::flush(const Stream& stream) {
  static uint8_t value = 0;
  buffer_.fill_bytes_async(++value, stream);  // a changing value, in case a driver ever skips no-op fills
}

std::vector<double> time_kernel_runs_ms(const std::function<void(Stream&)>& launch, const TimingOptions& options) {
  if (options.warmup < 0 || options.reps < 1)
    fail("time_kernel_runs_ms: expected warmup >= 0 and reps >= 1, got warmup {} and reps {}", options.warmup,
         options.reps);
  Stream stream = Stream::create();
  std::optional<L2Flusher> flusher;
  if (options.flush_l2)
    flusher.emplace();
  for (int i = 0; i < options.warmup; ++i)
    launch(stream);
  std::vector<Event> starts(options.reps), ends(options.reps);
  for (int i = 0; i < options.reps; ++i) {
    if (flusher)
      flusher->flush(stream);
    starts[i].record(stream);
    launch(stream);
    ends[i].record(stream);
  }
  stream.synchronize();
  std::vector<double> ms;
  ms.reserve(options.reps);
  for (int i = 0; i < options.reps; ++i)
    ms.push_back(Event::elapsed_ms(starts[i], ends[i]));
  return ms;
}

double time_kernel_ms(const std::function<void(Stream&)>& launch, const TimingOptions& options) {
  return median(time_kernel_runs_ms(launch, options));
}

double time_kernel_ms(const std::function<void(Stream&)>& launch, int warmup, int reps) {
  return time_kernel_ms(launch, TimingOptions{warmup, reps, false});
}

} // namespace kiln::rt
