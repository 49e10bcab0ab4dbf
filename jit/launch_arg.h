// One launch argument of a JIT-compiled kernel.
#pragma once

#include "runtime/device.h"

#include <cstdint>

namespace kiln {

// A device pointer (an address the user owns, or a DeviceBuffer's) or a scalar.
struct LaunchArg {
  enum class Kind : uint8_t { Pointer, Int, Float } kind = Kind::Int;
  uint64_t ptr = 0;
  int64_t i = 0;
  double f = 0;

  static LaunchArg pointer(uint64_t address) { return {Kind::Pointer, address, 0, 0}; }
  static LaunchArg pointer(const rt::DeviceBuffer& b) { return {Kind::Pointer, b.ptr(), 0, 0}; }
  static LaunchArg of_int(int64_t v) { return {Kind::Int, 0, v, 0}; }
  static LaunchArg of_float(double v) { return {Kind::Float, 0, 0, v}; }
};

} // namespace kiln
