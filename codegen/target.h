// The GPU a kernel is generated for.
#pragma once

#include <cstdint>
#include <string>

namespace kiln {

struct Target {
  int sm = 90;            // compute capability as major*10+minor: 80, 86, 89, 90
  bool arch_specific = true; // sm_90a rather than sm_90 (Hopper's wgmma/TMA need it)

  std::string arch() const { return "sm_" + std::to_string(sm) + (sm == 90 && arch_specific ? "a" : ""); }
  // The arch's hardware limits (CUDA programming guide, compute capabilities table): the most shared memory a
  // block can opt in to, and the most resident CTAs and threads an SM holds.
  int64_t max_shared_bytes_per_block() const;
  // The shared memory of one SM, which its resident CTAs share, each with kReservedSharedBytesPerBlock more
  // than it asks for (the system's own use).
  int64_t max_shared_bytes_per_sm() const;
  static constexpr int64_t kReservedSharedBytesPerBlock = 1024;
  // How many CTAs of `bytes_a_cta` shared bytes each (dynamic and static) fit in an SM's `shared_per_sm`, each
  // with its reserved kilobyte: the one statement of that rule (occupancy, the tuner's prune, the bulk stage).
  static int64_t ctas_by_shared_memory(int64_t bytes_a_cta, int64_t shared_per_sm) {
    return shared_per_sm / ((bytes_a_cta > 0 ? bytes_a_cta : 0) + kReservedSharedBytesPerBlock);
  }
  int64_t max_blocks_per_sm() const;
  int64_t max_threads_per_sm() const;
  static Target parse(const std::string& arch); // "sm_80", "sm_90a"; Error for anything else
};

} // namespace kiln
