// The runtime end to end on a real GPU: NVRTC compile, module load, launches on device buffers (exact
// results), opt-in dynamic shared memory, event timing. Skipped, with the reason printed, without a driver.
#include "gpu/gpu_skip.h"
#include "runtime/compile_cache.h"
#include "runtime/device.h"
#include "runtime/module.h"
#include "runtime/nvrtc.h"
#include "runtime/timing.h"
#include "support/error.h"

#include <gtest/gtest.h>

#include <cstring>
#include <random>
#include <vector>

namespace kiln::rt {
namespace {


const char* kVecAdd = R"(
extern "C" __global__ void smoke_vec_add(const float* a, const float* b, float* c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n)
    c[i] = a[i] + b[i];
}
)";

// Stages x through `n` floats of dynamic shared memory and writes it back reversed within the block's tile.
const char* kBigSmem = R"(
extern "C" __global__ void smoke_big_smem(const float* x, float* y, int n) {
  extern __shared__ float tile[];
  for (int i = threadIdx.x; i < n; i += blockDim.x)
    tile[i] = x[i];
  __syncthreads();
  for (int i = threadIdx.x; i < n; i += blockDim.x)
    y[i] = tile[n - 1 - i];
}
)";

CompiledKernel compile_for_device(const char* source, const char* name) {
  CompileRequest req;
  req.source = source;
  req.kernel_name = name;
  req.arch = current_device().arch;
  static CompileCache cache("");  // memory only: the test must not depend on a user's cache
  return cache.get(req);
}

TEST(RuntimeSmoke, DeviceIsDescribed) {
  KILN_REQUIRE_GPU();
  const DeviceInfo& d = current_device();
  EXPECT_FALSE(d.name.empty());
  EXPECT_GE(d.cc_major, 8);
  EXPECT_GT(d.sm_count, 0);
  EXPECT_GT(d.l2_bytes, 0);
  EXPECT_GE(d.max_shared_per_block_optin, d.max_shared_per_block);
  EXPECT_GT(d.driver_version, 0);
  std::printf("device %d: %s, %s, %d SMs, %lld KiB opt-in smem, %lld MiB L2, driver %d\n", d.ordinal,
              d.name.c_str(), d.arch.c_str(), d.sm_count, static_cast<long long>(d.max_shared_per_block_optin / 1024),
              static_cast<long long>(d.l2_bytes >> 20), d.driver_version);
}

TEST(RuntimeSmoke, VectorAddIsExact) {
  KILN_REQUIRE_GPU();
  CompiledKernel compiled = compile_for_device(kVecAdd, "smoke_vec_add");
  auto kernel = LoadedKernel::load(compiled);
  const int n = 1000003;  // not a multiple of the block size: the tail is bounds-checked
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> dist(-100.f, 100.f);
  std::vector<float> a(n), b(n);
  for (int i = 0; i < n; ++i) {
    a[i] = dist(rng);
    b[i] = dist(rng);
  }
  DeviceBuffer da = DeviceBuffer::from_host(a), db = DeviceBuffer::from_host(b);
  DeviceBuffer dc((n + 1) * sizeof(float));  // one float past the end must stay untouched
  dc.fill_bytes(0xff);                       // NaN poison
  CUdeviceptr pa = da.ptr(), pb = db.ptr(), pc = dc.ptr();
  int count = n;
  void* args[] = {&pa, &pb, &pc, &count};
  kernel->launch(Dim3{(n + 255) / 256}, Dim3{256}, 0, args);
  KILN_CU_CHECK(cuCtxSynchronize, "waiting for smoke_vec_add");
  std::vector<float> c = dc.to_host<float>();
  int mismatches = 0;
  for (int i = 0; i < n; ++i)
    if (c[i] != a[i] + b[i] && ++mismatches < 5)
      ADD_FAILURE() << "c[" << i << "] = " << c[i] << ", expected " << a[i] + b[i];
  EXPECT_EQ(mismatches, 0);
  uint32_t tail;
  std::memcpy(&tail, &c[n], sizeof(tail));
  EXPECT_EQ(tail, 0xffffffffu) << "the kernel wrote past n";

  ResourceUsage u = kernel->function_usage();
  EXPECT_GT(u.registers, 0);
  EXPECT_EQ(u.registers, compiled.usage.registers) << "the driver and the compile-time report agree";
  EXPECT_GE(u.max_threads_per_block, 256);
  EXPECT_EQ(LoadedKernel::load(compile_for_device(kVecAdd, "smoke_vec_add")), kernel) << "modules are cached";
}

TEST(RuntimeSmoke, HundredKiBOfDynamicSharedMemoryLaunches) {
  KILN_REQUIRE_GPU();
  const DeviceInfo& d = current_device();
  const size_t smem = 100 * 1024;
  if (d.max_shared_per_block_optin < static_cast<int64_t>(smem))
    GTEST_SKIP() << d.name << " allows only " << d.max_shared_per_block_optin << " bytes of shared memory per block";
  auto kernel = LoadedKernel::load(compile_for_device(kBigSmem, "smoke_big_smem"));
  int n = static_cast<int>(smem / sizeof(float));
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i)
    x[i] = static_cast<float>(i);
  DeviceBuffer dx = DeviceBuffer::from_host(x), dy(n * sizeof(float));
  dy.fill_bytes(0xff);
  CUdeviceptr px = dx.ptr(), py = dy.ptr();
  void* args[] = {&px, &py, &n};
  kernel->launch(Dim3{1}, Dim3{256}, smem, args);
  KILN_CU_CHECK(cuCtxSynchronize, "waiting for smoke_big_smem");
  std::vector<float> y = dy.to_host<float>();
  for (int i = 0; i < n; ++i)
    ASSERT_EQ(y[i], static_cast<float>(n - 1 - i)) << "at " << i;

  try {
    kernel->launch(Dim3{1}, Dim3{256}, d.max_shared_per_block_optin + 1, args);
    FAIL() << "expected a shared-memory limit error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("dynamic shared memory"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("smoke_big_smem"), std::string::npos) << e.what();
  }
}

TEST(RuntimeSmoke, EventsTimeAKernel) {
  KILN_REQUIRE_GPU();
  auto kernel = LoadedKernel::load(compile_for_device(kVecAdd, "smoke_vec_add"));
  const int n = 1 << 24;
  DeviceBuffer a(n * sizeof(float)), b(n * sizeof(float)), c(n * sizeof(float));
  a.fill_bytes(0);
  b.fill_bytes(0);
  CUdeviceptr pa = a.ptr(), pb = b.ptr(), pc = c.ptr();
  int count = n;
  void* args[] = {&pa, &pb, &pc, &count};
  auto launch = [&](Stream& s) { kernel->launch(Dim3{n / 256}, Dim3{256}, 0, args, s); };
  double warm = time_kernel_ms(launch, 2, 10);
  double cold = time_kernel_ms(launch, TimingOptions{1, 5, /*flush_l2=*/true});
  EXPECT_GT(warm, 0.0);
  EXPECT_GT(cold, 0.0);
  std::printf("vec_add of %d floats: %.4f ms median (warm L2), %.4f ms (L2 flushed)\n", n, warm, cold);
  EXPECT_THROW(time_kernel_ms(launch, 0, 0), Error);
}

TEST(RuntimeSmoke, LaunchErrorsNameTheKernelAndShape) {
  KILN_REQUIRE_GPU();
  auto kernel = LoadedKernel::load(compile_for_device(kVecAdd, "smoke_vec_add"));
  CUdeviceptr p = 0;
  int n = 0;
  void* args[] = {&p, &p, &p, &n};
  try {
    kernel->launch(Dim3{1}, Dim3{4096}, 0, args);  // above every device's 1024-thread limit
    FAIL() << "expected a launch error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("smoke_vec_add"), std::string::npos) << msg;
    EXPECT_NE(msg.find("block (4096, 1, 1)"), std::string::npos) << msg;
  }
}

} // namespace
} // namespace kiln::rt
