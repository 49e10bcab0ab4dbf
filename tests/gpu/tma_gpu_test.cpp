// The TMA device prelude (codegen/prelude/kiln_tma.cuh) against tensor maps the host encodes
// (runtime/tensor_map.h), on a real GPU: tile loads into a two-stage ring of shared memory with mbarrier
// phase tracking, the 128-byte swizzle as the shared tile sees it, zero fill past the tensor's edges, and
// tile stores that clip at the edges. The data are random 16-bit patterns compared bit for bit: a TMA copy
// moves bytes, so any difference is an addressing error. Skipped, with the reason printed, without a
// driver or NVRTC, or below compute capability 9.0.
#include "gpu/gpu_skip.h"
#include "codegen/prelude.h"
#include "runtime/compile_cache.h"
#include "runtime/device.h"
#include "runtime/module.h"
#include "runtime/tensor_map.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace kiln {
namespace {

constexpr int kBox = 64; // 64 x 64 f16 boxes: 128-byte rows, the widest the 128-byte swizzle allows

const char* kTestKernels = R"(
constexpr int kBox = 64;

// The 32-bit shared address of a 1024-byte-aligned region of `bytes` inside dynamic shared memory (the
// 128-byte swizzle repeats every 1024 bytes, and TMA wants its destination aligned to that).
__device__ kiln::u32 aligned_dynamic_smem() {
  extern __shared__ unsigned char smem[];
  return (kiln::smem_u32(smem) + 1023u) & ~1023u;
}

// Element (r, c) of a 64 x 64 f16 box that TMA wrote with the 128-byte swizzle: 16-byte chunk j of row r
// sits at chunk j ^ (r % 8) of that row.
__device__ unsigned short read_swizzled(kiln::u32 box, int r, int c) {
  const kiln::u32 chunk = static_cast<kiln::u32>((c / 8) ^ (r % 8));
  const kiln::u32 addr = box + r * 128 + chunk * 16 + (c % 8) * 2;
  unsigned short v;
  asm volatile("ld.shared.u16 %0, [%1];" : "=h"(v) : "r"(addr));
  return v;
}

// CTA x walks down column block x of the tensor, one 64 x 64 box per step, through a two-stage ring: the
// copy of step i + 1 is in flight while step i is read. Stage s = i % 2 completes phases 0, 1, 0, ... so
// step i waits for parity (i / 2) % 2. Every box lands in `out` (row_boxes * 64 x col_boxes * 64), elements
// outside the tensor included: TMA zero-fills them.
extern "C" __global__ void tma_ring_copy(const __grid_constant__ kiln::TensorMap map, int row_boxes, int out_cols,
                                         unsigned short* out) {
  __shared__ __align__(8) unsigned long long full[2];
  const kiln::u32 ring = aligned_dynamic_smem();
  const kiln::u32 stage_bytes = kBox * kBox * 2;
  const kiln::u32 bar0 = kiln::smem_u32(&full[0]), bar1 = kiln::smem_u32(&full[1]);
  const int col0 = blockIdx.x * kBox;
  if (threadIdx.x == 0) {
    kiln::tma_prefetch_map(&map);
    kiln::mbarrier_init(bar0, 1);
    kiln::mbarrier_init(bar1, 1);
    kiln::mbarrier_init_fence();
  }
  __syncthreads();
  auto issue = [&](int step) {
    const kiln::u32 bar = step % 2 ? bar1 : bar0;
    kiln::mbarrier_arrive_expect_tx(bar, stage_bytes);
    kiln::tma_load_2d(ring + (step % 2) * stage_bytes, &map, col0, step * kBox, bar);
  };
  if (threadIdx.x == 0)
    issue(0);
  for (int i = 0; i < row_boxes; ++i) {
    if (threadIdx.x == 0 && i + 1 < row_boxes)
      issue(i + 1);
    kiln::mbarrier_wait(i % 2 ? bar1 : bar0, (i / 2) % 2);
    const kiln::u32 box = ring + (i % 2) * stage_bytes;
    for (int e = threadIdx.x; e < kBox * kBox; e += blockDim.x) {
      const int r = e / kBox, c = e % kBox;
      out[static_cast<long long>(i * kBox + r) * out_cols + col0 + c] = read_swizzled(box, r, c);
    }
    // Every thread is done reading stage i % 2 before step i + 2 overwrites it through the async proxy.
    kiln::fence_proxy_async();
    __syncthreads();
  }
}

// CTA (x, y) loads box (x, y) of `src` and stores it unchanged through `dst`'s map (same shape): the store
// writes only the part of the box inside the tensor.
extern "C" __global__ void tma_load_store(const __grid_constant__ kiln::TensorMap src,
                                          const __grid_constant__ kiln::TensorMap dst) {
  __shared__ __align__(8) unsigned long long full;
  const kiln::u32 box = aligned_dynamic_smem();
  const kiln::u32 bar = kiln::smem_u32(&full);
  if (threadIdx.x == 0) {
    kiln::mbarrier_init(bar, 1);
    kiln::mbarrier_init_fence();
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    kiln::mbarrier_arrive_expect_tx(bar, kBox * kBox * 2);
    kiln::tma_load_2d(box, &src, blockIdx.x * kBox, blockIdx.y * kBox, bar);
  }
  kiln::mbarrier_wait(bar, 0);
  if (threadIdx.x == 0) {
    kiln::tma_store_2d(&dst, blockIdx.x * kBox, blockIdx.y * kBox, box);
    kiln::bulk_commit();
    kiln::bulk_wait<0>();
  }
}
)";

#define KILN_REQUIRE_TMA()                                                                                   \
  do {                                                                                                       \
    KILN_REQUIRE_GPU();                                                                                      \
    const rt::DeviceInfo& device_ = rt::current_device();                                                    \
    if (device_.cc_major < 9)                                                                                \
      GTEST_SKIP() << "TMA needs compute capability 9.0 or newer; " << device_.name << " is " << device_.arch; \
    if (rt::driver().cuTensorMapEncodeTiled == nullptr)                                                      \
      GTEST_SKIP() << "the CUDA driver (version " << rt::driver().version << ") has no cuTensorMapEncodeTiled"; \
  } while (0)

std::shared_ptr<rt::LoadedKernel> load_kernel(const char* name) {
  static rt::CompileCache cache(""); // memory only: the test must not depend on a user's cache
  rt::CompileRequest req;
  req.source = std::string(prelude_source()) + std::string(wgmma_prelude_source()) +
               std::string(tma_prelude_source()) + kTestKernels;
  req.kernel_name = name;
  req.arch = rt::current_device().arch;
  return rt::LoadedKernel::load(cache.get(req));
}

// A row-major rows x cols f16 tensor at `address`, read in 64 x 64 boxes with the 128-byte swizzle.
rt::CUtensorMap f16_map(rt::CUdeviceptr address, int64_t rows, int64_t cols) {
  rt::BlockPointerGeometry g;
  g.element = rt::TensorMapElement::f16;
  g.base_address = address;
  g.shape = {rows, cols};
  g.strides = {cols, 1};
  g.block_shape = {kBox, kBox};
  g.order = {1, 0};
  rt::TensorMapSpec spec =
      rt::tensor_map_spec_for_block_pointer(g, rt::TensorMapSwizzle::span128, rt::TensorMapOobFill::zero);
  EXPECT_TRUE(rt::is_legal(spec)) << rt::describe(spec);
  return rt::encode_tensor_map(spec);
}

std::vector<uint16_t> random_bits(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<uint16_t> v(n);
  for (uint16_t& x : v)
    x = static_cast<uint16_t>(rng());
  return v;
}

void synchronize(const char* what) { KILN_CU_CHECK(cuCtxSynchronize, what); }

const size_t kRingSmem = 2 * kBox * kBox * 2 + 1024; // two stages, plus room to align to 1024 bytes

// Shapes whose edges cut boxes (rows and cols not multiples of 64) and one that fits exactly; 9 row boxes
// take each stage through four and five phases.
TEST(TmaGpu, RingOfTileLoadsMatchesTheTensorWithZeroFill) {
  KILN_REQUIRE_TMA();
  for (auto [rows, cols] : {std::pair<int64_t, int64_t>{520, 200}, {128, 64}, {70, 136}}) {
    SCOPED_TRACE(testing::Message() << rows << " x " << cols);
    const std::vector<uint16_t> host = random_bits(static_cast<size_t>(rows * cols), 7u + rows);
    rt::DeviceBuffer tensor = rt::DeviceBuffer::from_host(host);
    const int row_boxes = static_cast<int>((rows + kBox - 1) / kBox);
    const int col_boxes = static_cast<int>((cols + kBox - 1) / kBox);
    const int out_cols = col_boxes * kBox;
    rt::DeviceBuffer out(static_cast<size_t>(row_boxes) * kBox * out_cols * 2);
    out.fill_bytes(0xff); // every element must be written, zero fill included
    rt::CUtensorMap map = f16_map(tensor.ptr(), rows, cols);
    rt::CUdeviceptr out_ptr = out.ptr();
    int rb = row_boxes, oc = out_cols;
    void* args[] = {&map, &rb, &oc, &out_ptr};
    load_kernel("tma_ring_copy")->launch(rt::Dim3{static_cast<unsigned>(col_boxes)}, rt::Dim3{128}, kRingSmem, args);
    synchronize("tma_ring_copy");
    const std::vector<uint16_t> got = out.to_host<uint16_t>();
    int bad = 0;
    for (int64_t r = 0; r < row_boxes * kBox; ++r)
      for (int64_t c = 0; c < out_cols; ++c) {
        const uint16_t want = r < rows && c < cols ? host[static_cast<size_t>(r * cols + c)] : 0;
        const uint16_t have = got[static_cast<size_t>(r * out_cols + c)];
        if (have != want && bad++ < 5)
          ADD_FAILURE() << "element (" << r << ", " << c << "): 0x" << std::hex << have << ", want 0x" << want;
      }
    EXPECT_EQ(bad, 0) << "mismatching elements";
  }
}

TEST(TmaGpu, TileStoresWriteOnlyInsideTheTensor) {
  KILN_REQUIRE_TMA();
  const int64_t rows = 150, cols = 72; // both edges cut a box
  const std::vector<uint16_t> host = random_bits(static_cast<size_t>(rows * cols), 99);
  rt::DeviceBuffer src = rt::DeviceBuffer::from_host(host);
  // The destination has a guard band after the tensor: a store past the edge would land there.
  const size_t guard = 4096;
  rt::DeviceBuffer dst(static_cast<size_t>(rows * cols) * 2 + guard * 2);
  dst.fill_bytes(0xff);
  rt::CUtensorMap src_map = f16_map(src.ptr(), rows, cols), dst_map = f16_map(dst.ptr(), rows, cols);
  void* args[] = {&src_map, &dst_map};
  const rt::Dim3 grid{static_cast<unsigned>((cols + kBox - 1) / kBox), static_cast<unsigned>((rows + kBox - 1) / kBox)};
  load_kernel("tma_load_store")->launch(grid, rt::Dim3{128}, kBox * kBox * 2 + 1024, args);
  synchronize("tma_load_store");
  const std::vector<uint16_t> got = dst.to_host<uint16_t>();
  for (size_t i = 0; i < host.size(); ++i)
    ASSERT_EQ(got[i], host[i]) << "element " << i << " (row " << i / cols << ", col " << i % cols << ")";
  for (size_t i = host.size(); i < got.size(); ++i)
    ASSERT_EQ(got[i], 0xffff) << "element " << i - host.size() << " past the tensor was written";
}

} // namespace
} // namespace kiln
