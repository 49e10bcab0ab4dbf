// kiln's branch-free f32 erf (codegen/prelude/kiln_erf.cuh) on the GPU against the same text compiled as host
// C++ with an exact 2^x (tests/unit/erf_prelude_test.cpp bounds the host's error: 1.3 ulp). The device differs
// only in ex2.approx, whose 2 ulp on a term below 0.21 may move the result by one f32 step, never more.
// Skipped, with the reason printed, where there is no CUDA driver or no NVRTC.
#include "gpu/gpu_skip.h"
#include "gpu/prelude_gpu_support.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#define KILN_ERF_FN inline
#define KILN_ERF_EX2(x) std::exp2(x)
#include "codegen/prelude/kiln_erf.cuh"
#undef KILN_ERF_FN
#undef KILN_ERF_EX2

namespace kiln {
namespace {

using namespace testing_support;

const char* kErfKernel = R"(
extern "C" __global__ void erf_sweep(const float* x, int n, float* out) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    out[i] = kiln::erf_f32(x[i]);
}
)";

int64_t ordered(float f) { // f32s in order as integers: the distance of two is their number of f32 steps
  int32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b < 0 ? -static_cast<int64_t>(b & 0x7fffffff) : b;
}

TEST(ErfGpu, MatchesTheHostTextWithinOneStep) {
  KILN_REQUIRE_GPU();
  std::vector<float> x;
  for (uint32_t bits = 0; bits <= 0x40900000u; bits += 251) { // 0 .. 4.5, both signs
    float v;
    std::memcpy(&v, &bits, sizeof v);
    x.push_back(v);
    x.push_back(-v);
  }
  const float inf = std::numeric_limits<float>::infinity();
  for (float v : {0.9f, std::nextafter(0.9f, 0.0f), 4.0f, 100.0f, 3e38f, inf, -inf})
    x.push_back(v);
  x.push_back(std::numeric_limits<float>::quiet_NaN());
  const int n = static_cast<int>(x.size());
  rt::DeviceBuffer dx = rt::DeviceBuffer::from_host(x), out = poisoned<float>(x.size());
  rt::CUdeviceptr px = dx.ptr(), pout = out.ptr();
  int count = n;
  void* args[] = {&px, &count, &pout};
  const std::string source = std::string(erf_prelude_source()) + kErfKernel;
  load_prelude_kernel(source.c_str(), "erf_sweep")
      ->launch(rt::Dim3{static_cast<unsigned>((n + 255) / 256)}, rt::Dim3{256}, 0, args);
  synchronize("erf_sweep");
  const std::vector<float> got = out.to_host<float>();
  int64_t worst = 0;
  for (int i = 0; i < n; ++i) {
    const float want = erf_f32(x[i]);
    if (std::isnan(want)) {
      EXPECT_TRUE(std::isnan(got[i])) << "erf(NaN)";
      continue;
    }
    const int64_t steps = std::llabs(ordered(got[i]) - ordered(want));
    worst = std::max(worst, steps);
    EXPECT_LE(steps, 1) << "erf_f32(" << x[i] << "): device " << got[i] << ", host " << want;
  }
  EXPECT_EQ(got[n - 2], -1.0f) << "erf(-inf)";
  std::printf("erf_f32: %d values, the device at most %lld f32 step(s) from the host\n", n,
              static_cast<long long>(worst));
}

} // namespace
} // namespace kiln
