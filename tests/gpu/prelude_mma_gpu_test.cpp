// The device prelude's mma.sync (codegen/prelude/kiln_prelude.cuh) on a real GPU: f16 and bf16 m16n8k16 with
// A and B staged through shared memory and read with ldmatrix, and tf32 m16n8k8, each against a host matmul of
// small integers (exact). Skipped, with the reason printed, where there is no CUDA driver or no NVRTC.
#include "gpu/gpu_skip.h"
#include "gpu/prelude_gpu_support.h"
#include "support/half.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

namespace kiln {
namespace {

using namespace testing_support;

// Test kernels, compiled after the prelude. Each uses the prelude the way generated code will.
const char* kTestKernels = R"(
// ---- mma: one warp per problem; D = C + A(16xK) * B(Kx8), A row-major, B K x N row-major -----------------

// Writes the accumulator fragment d (see mma_m16n8k16_f16) to a row-major 16x8 tile.
__device__ void store_accumulator(float* out, const float (&d)[4]) {
  const int g = kiln::lane_id() / 4, t = kiln::lane_id() % 4;
  out[g * 8 + 2 * t] = d[0];
  out[g * 8 + 2 * t + 1] = d[1];
  out[(g + 8) * 8 + 2 * t] = d[2];
  out[(g + 8) * 8 + 2 * t + 1] = d[3];
}
__device__ void load_accumulator(const float* in, float (&d)[4]) {
  const int g = kiln::lane_id() / 4, t = kiln::lane_id() % 4;
  d[0] = in[g * 8 + 2 * t];
  d[1] = in[g * 8 + 2 * t + 1];
  d[2] = in[(g + 8) * 8 + 2 * t];
  d[3] = in[(g + 8) * 8 + 2 * t + 1];
}

__device__ void mma_k16_step(float (&d)[4], const kiln::u32 (&a)[4], const kiln::u32 (&b)[2], kiln::f16) {
  kiln::mma_m16n8k16_f16(d, a, b);
}
__device__ void mma_k16_step(float (&d)[4], const kiln::u32 (&a)[4], const kiln::u32 (&b)[2], kiln::bf16) {
  kiln::mma_m16n8k16_bf16(d, a, b);
}

// T is kiln::f16 or kiln::bf16 (16x16 A, 16x8 B); staged through shared memory and read with ldmatrix.
template <class T> __device__ void mma_k16(const T* A, const T* B, const float* C, float* D) {
  __shared__ __align__(16) T a_s[16 * 16];
  __shared__ __align__(16) T b_s[16 * 8];
  const int lane = kiln::lane_id(), p = blockIdx.x;
  for (int i = lane; i < 16 * 16; i += 32)
    a_s[i] = A[p * 256 + i];
  for (int i = lane; i < 16 * 8; i += 32)
    b_s[i] = B[p * 128 + i];
  __syncthreads();
  kiln::u32 a[4], b[2];
  // A: lanes 0-15 address rows 0-15 at column 0, lanes 16-31 the same rows at column 8.
  kiln::ldmatrix_x4(kiln::smem_u32(&a_s[(lane % 16) * 16 + (lane / 16) * 8]), a);
  // B: lanes 0-15 address K rows 0-15; .trans hands each lane a column.
  kiln::ldmatrix_x2_trans(kiln::smem_u32(&b_s[(lane % 16) * 8]), b);
  float d[4];
  load_accumulator(C + p * 128, d);
  mma_k16_step(d, a, b, T{});
  store_accumulator(D + p * 128, d);
}
extern "C" __global__ void prelude_mma_f16(const kiln::f16* A, const kiln::f16* B, const float* C, float* D) {
  mma_k16(A, B, C, D);
}
extern "C" __global__ void prelude_mma_bf16(const kiln::bf16* A, const kiln::bf16* B, const float* C, float* D) {
  mma_k16(A, B, C, D);
}

// tf32: 16x8 A read with ldmatrix_x4 (each f32 is two b16), 8x8 B read element-wise, both through to_tf32.
extern "C" __global__ void prelude_mma_tf32(const float* A, const float* B, const float* C, float* D) {
  __shared__ __align__(16) float a_s[16 * 8];
  __shared__ __align__(16) float b_s[8 * 8];
  const int lane = kiln::lane_id(), p = blockIdx.x;
  for (int i = lane; i < 16 * 8; i += 32)
    a_s[i] = A[p * 128 + i];
  for (int i = lane; i < 8 * 8; i += 32)
    b_s[i] = B[p * 64 + i];
  __syncthreads();
  kiln::u32 raw[4], a[4], b[2];
  kiln::ldmatrix_x4(kiln::smem_u32(&a_s[(lane % 16) * 8 + (lane / 16) * 4]), raw);
  for (int i = 0; i < 4; ++i)
    a[i] = kiln::to_tf32(__uint_as_float(raw[i]));
  const int g = lane / 4, t = lane % 4;
  b[0] = kiln::to_tf32(b_s[t * 8 + g]);
  b[1] = kiln::to_tf32(b_s[(t + 4) * 8 + g]);
  float d[4];
  load_accumulator(C + p * 128, d);
  kiln::mma_m16n8k8_tf32(d, a, b);
  store_accumulator(D + p * 128, d);
}
)";

std::shared_ptr<rt::LoadedKernel> load_kernel(const char* name) { return load_prelude_kernel(kTestKernels, name); }

// ---- mma -----------------------------------------------------------------------------------------------

// Random small integers: every product and sum below is exact in f32, so D must equal the host exactly.
std::vector<float> small_ints(size_t n, int lo, int hi, std::mt19937& rng) {
  std::uniform_int_distribution<int> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v)
    x = static_cast<float>(dist(rng));
  return v;
}

// D[p] = C[p] + A[p] (16xK) * B[p] (Kx8), all row-major.
std::vector<float> host_mma(const std::vector<float>& A, const std::vector<float>& B, const std::vector<float>& C,
                            int problems, int K) {
  std::vector<float> D(C);
  for (int p = 0; p < problems; ++p)
    for (int m = 0; m < 16; ++m)
      for (int n = 0; n < 8; ++n) {
        double acc = C[p * 128 + m * 8 + n];
        for (int k = 0; k < K; ++k)
          acc += static_cast<double>(A[p * 16 * K + m * K + k]) * B[p * K * 8 + k * 8 + n];
        D[p * 128 + m * 8 + n] = static_cast<float>(acc);
      }
  return D;
}

void expect_same_tiles(const std::vector<float>& got, const std::vector<float>& want, const char* what) {
  ASSERT_EQ(got.size(), want.size());
  int bad = 0;
  for (size_t i = 0; i < got.size(); ++i)
    if (!(got[i] == want[i]) && ++bad <= 5)
      ADD_FAILURE() << what << ": problem " << i / 128 << ", D[" << (i % 128) / 8 << "][" << i % 8 << "] = " << got[i]
                    << ", expected " << want[i];
  EXPECT_EQ(bad, 0) << what;
}

// Runs prelude_mma_f16 or prelude_mma_bf16 on `problems` random 16x16x8 problems.
void check_mma_k16(const char* kernel_name, uint16_t (*to_bits)(float), unsigned seed) {
  const int problems = 8;
  std::mt19937 rng(seed);
  std::vector<float> A = small_ints(problems * 256, -8, 8, rng), B = small_ints(problems * 128, -8, 8, rng),
                     C = small_ints(problems * 128, -100, 100, rng);
  std::vector<uint16_t> a16(A.size()), b16(B.size());
  std::transform(A.begin(), A.end(), a16.begin(), to_bits);
  std::transform(B.begin(), B.end(), b16.begin(), to_bits);
  rt::DeviceBuffer da = rt::DeviceBuffer::from_host(a16), db = rt::DeviceBuffer::from_host(b16),
                   dc = rt::DeviceBuffer::from_host(C), dd = poisoned<float>(C.size());
  rt::CUdeviceptr pa = da.ptr(), pb = db.ptr(), pc = dc.ptr(), pd = dd.ptr();
  void* args[] = {&pa, &pb, &pc, &pd};
  load_kernel(kernel_name)->launch(rt::Dim3{problems}, rt::Dim3{32}, 0, args);
  synchronize(kernel_name);
  expect_same_tiles(dd.to_host<float>(), host_mma(A, B, C, problems, 16), kernel_name);
}

TEST(PreludeGpu, MmaF16FromLdmatrixIsExact) {
  KILN_REQUIRE_GPU();
  check_mma_k16("prelude_mma_f16", float_to_f16_bits, 101);
}

TEST(PreludeGpu, MmaBf16FromLdmatrixIsExact) {
  KILN_REQUIRE_GPU();
  check_mma_k16("prelude_mma_bf16", float_to_bf16_bits, 202);
}

TEST(PreludeGpu, MmaTf32IsExact) {
  KILN_REQUIRE_GPU();
  const int problems = 8;
  std::mt19937 rng(303);
  std::vector<float> A = small_ints(problems * 128, -8, 8, rng), B = small_ints(problems * 64, -8, 8, rng),
                     C = small_ints(problems * 128, -100, 100, rng);
  rt::DeviceBuffer da = rt::DeviceBuffer::from_host(A), db = rt::DeviceBuffer::from_host(B),
                   dc = rt::DeviceBuffer::from_host(C), dd = poisoned<float>(C.size());
  rt::CUdeviceptr pa = da.ptr(), pb = db.ptr(), pc = dc.ptr(), pd = dd.ptr();
  void* args[] = {&pa, &pb, &pc, &pd};
  load_kernel("prelude_mma_tf32")->launch(rt::Dim3{problems}, rt::Dim3{32}, 0, args);
  synchronize("prelude_mma_tf32");
  expect_same_tiles(dd.to_host<float>(), host_mma(A, B, C, problems, 8), "prelude_mma_tf32");
}

} // namespace
} // namespace kiln
