// What the interpreter's unit tests share (interpreter_test.cpp: op semantics, arguments and control flow;
// interpreter_memory_test.cpp: pointer and block-pointer memory access): buffers whose every element a test
// must have written, random inputs, kernels that read x and write y, and the message of a failing run.
#pragma once

#include "dsl/dsl.h"
#include "dsl/interpreter.h"

#include <functional>
#include <limits>
#include <random>
#include <string>

namespace kiln::testing_support {

inline constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

// A buffer whose every element is NaN (floats) or a sentinel (integers), so that each element a
// test checks must have been written.
inline HostBuffer poisoned(DType t, int64_t n, std::string name) {
  HostBuffer b(t, n, std::move(name));
  for (int64_t i = 0; i < n; ++i)
    is_float(t) ? b.set(i, kNaN) : b.set_int(i, -12345);
  return b;
}

inline HostBuffer random_floats(DType t, int64_t n, std::string name, unsigned seed, double lo = -2,
                                double hi = 2) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(lo, hi);
  HostBuffer b(t, n, std::move(name));
  for (int64_t i = 0; i < n; ++i)
    b.set(i, dist(rng));
  return b;
}

inline HostBuffer random_ints(DType t, int64_t n, std::string name, unsigned seed, int64_t lo, int64_t hi) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int64_t> dist(lo, hi);
  HostBuffer b(t, n, std::move(name));
  for (int64_t i = 0; i < n; ++i)
    b.set(i, static_cast<double>(dist(rng)));
  return b;
}

// Row-major offsets of an (R, C) tile with row stride `stride`.
inline Value tile_offsets(int64_t R, int64_t C, int64_t stride) {
  return arange(0, R).expand_dims(1) * stride + arange(0, C).expand_dims(0); // (R, C) i32
}

// y[0:n] = fn(x[0:n]), one program, no masks.
inline Kernel unary_kernel(DType in, DType out, int64_t n, const std::function<Value(Value)>& fn) {
  KernelBuilder kb("unary");
  Value x = kb.arg_ptr("x", in), y = kb.arg_ptr("y", out);
  Value offs = arange(0, n);
  store(y + offs, fn(load(x + offs)));
  return kb.finish();
}

inline const Grid kOne = {1, 1, 1};

// The message of the kiln::Error that `fn` throws, or "(no error)".
inline std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

} // namespace kiln::testing_support
