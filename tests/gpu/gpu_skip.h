// The one way GPU tests skip: where no CUDA driver (or, for compiling tests, no NVRTC) is usable,
// the test is skipped with the reason printed.
#pragma once

#include "runtime/cuda_driver.h"
#include "runtime/device.h"
#include "runtime/nvrtc.h"

#include <gtest/gtest.h>

#include <string>

#define KILN_REQUIRE_GPU()                                                                                     \
  do {                                                                                                         \
    std::string kiln_why_;                                                                                     \
    if (!::kiln::rt::driver_available(&kiln_why_))                                                             \
      GTEST_SKIP() << "no usable CUDA driver: " << kiln_why_;                                                  \
    if (!::kiln::rt::nvrtc_available(&kiln_why_))                                                              \
      GTEST_SKIP() << "NVRTC not available: " << kiln_why_;                                                    \
  } while (0)

// A test of a Hopper feature (TMA, warp specialisation), after KILN_REQUIRE_GPU: skipped, saying why, on a GPU below
// compute capability 9.0.
#define KILN_REQUIRE_SM90(feature)                                                                             \
  do {                                                                                                         \
    const ::kiln::rt::DeviceInfo& kiln_device_ = ::kiln::rt::current_device();                                 \
    if (kiln_device_.cc_major < 9)                                                                             \
      GTEST_SKIP() << feature << " needs compute capability 9.0; " << kiln_device_.name << " is "              \
                   << kiln_device_.arch;                                                                       \
  } while (0)
