// Shared by the runtime tests: skipping without NVRTC, scratch directories, small CUDA sources.
#pragma once

#include "runtime/nvrtc.h"

#include <gtest/gtest.h>
#include <llvm/Support/FileSystem.h>

#include <string>

namespace kiln::rt::testing {

// GTEST_SKIP() must run in the test body itself, hence a macro.
#define KILN_SKIP_WITHOUT_NVRTC()                                                                          \
  do {                                                                                                     \
    std::string why_;                                                                                      \
    if (!::kiln::rt::nvrtc_available(&why_))                                                               \
      GTEST_SKIP() << "NVRTC not available: " << why_;                                                     \
  } while (0)

// A fresh directory, removed with everything in it on destruction.
class ScratchDir {
public:
  ScratchDir() {
    llvm::SmallString<256> path;
    std::error_code ec = llvm::sys::fs::createUniqueDirectory("kiln-runtime-test", path);
    EXPECT_FALSE(ec) << ec.message();
    path_ = path.str().str();
  }
  ~ScratchDir() { llvm::sys::fs::remove_directories(path_); }
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }

private:
  std::string path_;
};

inline const char* kVecAddSource = R"(
extern "C" __global__ void vec_add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    c[i] = a[i] + b[i];
}
)";

// Uses 1 KiB of static shared memory, so ptxas reports smem.
inline const char* kReverseSource = R"(
extern "C" __global__ void reverse_blocks(float* x) {
  __shared__ float tile[256];
  unsigned i = blockIdx.x * 256 + threadIdx.x;
  tile[threadIdx.x] = x[i];
  __syncthreads();
  x[i] = tile[255 - threadIdx.x];
}
)";

inline bool starts_with_elf_magic(const std::string& image) {
  return image.size() >= 4 && image.compare(0, 4, "\x7f" "ELF") == 0;
}

} // namespace kiln::rt::testing
