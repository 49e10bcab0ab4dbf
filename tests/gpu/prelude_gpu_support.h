// What the device prelude's GPU tests share (prelude_gpu_test.cpp: memory movement, shuffles, atomics and
// block pointers; prelude_mma_gpu_test.cpp: mma.sync fed by ldmatrix; prelude_numerics_gpu_test.cpp:
// conversions, math and NaN rules): a test kernel compiled after the prelude, a checked synchronize, and
// output buffers whose every element a kernel must write.
#pragma once

#include "codegen/prelude.h"
#include "runtime/compile_cache.h"
#include "runtime/cuda_driver.h"
#include "runtime/device.h"
#include "runtime/module.h"

#include <cstddef>
#include <memory>
#include <string>

namespace kiln::testing_support {

// The kernel `name` of `test_kernels`, CUDA source compiled after the prelude for the current device.
inline std::shared_ptr<rt::LoadedKernel> load_prelude_kernel(const char* test_kernels, const char* name) {
  static rt::CompileCache cache(""); // memory only: the test must not depend on a user's cache
  rt::CompileRequest req;
  req.source = std::string(prelude_source()) + test_kernels;
  req.kernel_name = name;
  req.arch = rt::current_device().arch;
  return rt::LoadedKernel::load(cache.get(req));
}

// Waits for the device; a failure names `what`.
inline void synchronize(const char* what) { KILN_CU_CHECK(cuCtxSynchronize, what); }

// A device buffer of `count` T, every byte 0xff.
template <typename T> rt::DeviceBuffer poisoned(size_t count) {
  rt::DeviceBuffer b(count * sizeof(T));
  b.fill_bytes(0xff); // NaN for floats, -1 for integers: every element must be written
  return b;
}

} // namespace kiln::testing_support
