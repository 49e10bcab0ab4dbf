// resident_ctas_per_sm (jit/occupancy.h): the least of the thread, register and shared-memory limits.
#include "jit/occupancy.h"

#include <gtest/gtest.h>

namespace kiln {
namespace {

constexpr int64_t kH100SharedPerSm = 233472; // 228 KiB

TEST(Occupancy, SharedMemoryLimitsTheDecodeSplitKernel) {
  // decode_split's default tile on an H100: 128 threads, 68 KiB of tiles (Q 16x128 and two stages of K and V
  // 64x128 in f16): 3 CTAs an SM (3 x 69 KiB of 228), not the 16 its threads would allow.
  EXPECT_EQ(resident_ctas_per_sm(Target{90}, 128, 96, 68 * 1024, kH100SharedPerSm), 3);
}

TEST(Occupancy, RegistersAreAllocatedPerWarpInUnitsOf256) {
  // 256 threads at 128 registers: 8 warps x 4096 = 32768 of 65536, 2 CTAs; at 129 registers a warp takes
  // 4128 rounded up to 4352, and 65536 / 4352 = 15 warps: 1 CTA of 8.
  EXPECT_EQ(resident_ctas_per_sm(Target{90}, 256, 128, 0, kH100SharedPerSm), 2);
  EXPECT_EQ(resident_ctas_per_sm(Target{90}, 256, 129, 0, kH100SharedPerSm), 1);
}

TEST(Occupancy, ThreadsAndTheArchsCtaLimit) {
  // 64 threads at 16 registers: 2048 / 64 = 32 CTAs on sm_90 (its CTA limit too), 1536 / 64 = 24 on sm_86,
  // whose limit is 16 CTAs.
  EXPECT_EQ(resident_ctas_per_sm(Target{90}, 64, 16, 0, kH100SharedPerSm), 32);
  EXPECT_EQ(resident_ctas_per_sm(Target{86, false}, 64, 16, 0, 102400), 16);
}

TEST(Occupancy, AtLeastOne) {
  // A CTA larger than the SM's shared memory fails at launch; the count stays 1 so that wave arithmetic holds.
  EXPECT_EQ(resident_ctas_per_sm(Target{90}, 1024, 255, 300 * 1024, kH100SharedPerSm), 1);
  EXPECT_EQ(resident_ctas_per_sm(Target{90}, 128, -1, 0, 0), 16); // unknown registers, no shared-memory limit
}

} // namespace
} // namespace kiln
