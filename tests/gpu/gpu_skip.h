// The one way GPU tests skip: where no CUDA driver (or, for compiling tests, no NVRTC) is usable,
// the test is skipped with the reason printed.
#pragma once

#include "runtime/cuda_driver.h"
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
