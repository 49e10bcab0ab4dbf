#include "jit/occupancy.h"

#include <algorithm>

namespace kiln {

namespace {
constexpr int64_t kRegistersPerSm = 64 * 1024;
constexpr int64_t kRegisterUnit = 256; // registers are allocated to a warp in units of this many
} // namespace

int64_t resident_ctas_per_sm(const Target& target, int64_t threads, int64_t registers, int64_t shared_bytes,
                             int64_t shared_per_sm) {
  int64_t ctas = target.max_blocks_per_sm();
  if (threads > 0) {
    ctas = std::min(ctas, target.max_threads_per_sm() / threads);
    const int64_t warps = (threads + 31) / 32;
    const int64_t per_warp = (std::max<int64_t>(registers, 1) * 32 + kRegisterUnit - 1) / kRegisterUnit * kRegisterUnit;
    ctas = std::min(ctas, kRegistersPerSm / per_warp / warps);
  }
  if (shared_per_sm > 0)
    ctas = std::min(ctas, Target::ctas_by_shared_memory(shared_bytes, shared_per_sm));
  return std::max<int64_t>(ctas, 1);
}

int64_t resident_ctas_per_sm(const JitKernel& kernel, const rt::DeviceInfo& device) {
  const Target target{device.cc_major * 10 + device.cc_minor, true};
  const rt::ResourceUsage& usage = kernel.compiled().usage;
  return resident_ctas_per_sm(target, kernel.generated().threads, usage.registers,
                              kernel.generated().shared_bytes + std::max<int64_t>(usage.shared_bytes, 0),
                              device.max_shared_per_sm);
}

} // namespace kiln
