// The device prelude (codegen/prelude/kiln_prelude.cuh) on a real GPU: mma.sync f16/bf16/tf32 fed by ldmatrix
// from shared memory against host matmuls (exact), cp.async with zero fill, vector global loads/stores,
// conversions against support/half.h bit for bit, warp shuffles, atomics, math and NaN rules, block
// pointers. Skipped, with the reason printed, where there is no CUDA driver or no NVRTC.
#include "gpu/gpu_skip.h"
#include "codegen/prelude.h"
#include "runtime/compile_cache.h"
#include "runtime/device.h"
#include "runtime/module.h"
#include "runtime/nvrtc.h"
#include "support/half.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace kiln {
namespace {


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

// ---- cp.async: 64 threads; thread i copies chunk i of each size when i < valid, else zero-fills ----------
extern "C" __global__ void prelude_cp_async(const kiln::u32* src, int valid, kiln::u32* out) {
  __shared__ __align__(16) kiln::u32 s[64 * 4 + 64 * 2 + 64];  // 16-, 8- and 4-byte regions
  const int i = threadIdx.x;
  for (int w = i; w < 64 * 7; w += 64)
    s[w] = 0xdeadbeefu;  // must be overwritten, by data or by zeros
  __syncthreads();
  const bool in = i < valid;
  const kiln::u32 base = kiln::smem_u32(s);
  kiln::cp_async_16(base + i * 16, in ? src + i * 4 : src, in);
  kiln::cp_async_commit();
  kiln::cp_async_8(base + 64 * 16 + i * 8, in ? src + i * 2 : src, in);
  kiln::cp_async_commit();
  kiln::cp_async_4(base + 64 * 24 + i * 4, in ? src + i : src, in);
  kiln::cp_async_commit();
  kiln::cp_async_wait<2>();
  kiln::cp_async_wait<1>();
  kiln::cp_async_wait<0>();
  kiln::cp_async_wait_all();
  __syncthreads();
  for (int w = i; w < 64 * 7; w += 64)
    out[w] = s[w];
}

// ---- ld_global / st_global: thread i moves its 16-, 8-, 4- and 2-byte pieces --------------------------
extern "C" __global__ void prelude_vector_copy(const unsigned char* src, unsigned char* dst) {
  const int i = threadIdx.x;
  kiln::u32 v16[4], v8[2], v4[1];
  unsigned short v2;
  kiln::ld_global<16>(src + i * 16, v16);
  kiln::ld_global<8>(src + 1024 + i * 8, v8);
  kiln::ld_global<4>(src + 1536 + i * 4, v4);
  kiln::ld_global<2>(src + 1792 + i * 2, &v2);
  kiln::st_global<16>(dst + i * 16, v16);
  kiln::st_global<8>(dst + 1024 + i * 8, v8);
  kiln::st_global<4>(dst + 1536 + i * 4, v4);
  kiln::st_global<2>(dst + 1792 + i * 2, &v2);
}

// ---- conversions, one input per thread ----------------------------------------------------------------
extern "C" __global__ void prelude_convert(const float* x, int n, unsigned short* f16_bits, float* f16_back,
                                           unsigned short* bf16_bits, float* bf16_back, kiln::u32* tf32,
                                           kiln::u32* packed_f16, kiln::u32* packed_bf16, int* to_int,
                                           unsigned short* f16_to_bf16, double* bf16_to_double) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= n)
    return;
  const float v = x[i];
  const kiln::f16 h = kiln::cvt<kiln::f16>(v);
  const kiln::bf16 b = kiln::cvt<kiln::bf16>(v);
  f16_bits[i] = h.bits;
  f16_back[i] = kiln::cvt<float>(h);
  bf16_bits[i] = b.bits;
  bf16_back[i] = kiln::cvt<float>(b);
  tf32[i] = kiln::to_tf32(v);
  packed_f16[i] = kiln::pack_f16x2(v, -v);
  packed_bf16[i] = kiln::pack_bf16x2(v, -v);
  to_int[i] = kiln::cvt<int>(v);
  f16_to_bf16[i] = kiln::cvt<kiln::bf16>(h).bits;
  bf16_to_double[i] = kiln::cvt<double>(b);
}

// ---- shuffles: 4 warps, each reduces its own 32 values with a butterfly ---------------------------------
extern "C" __global__ void prelude_shuffle(const float* fin, const int* iin, const long long* lin,
                                           const double* din, const unsigned short* hin, const int* bin,
                                           float* fout, int* iout, long long* lout, double* dout,
                                           unsigned short* hout, unsigned short* bhout, int* bout, int* ids,
                                           int* perm) {
  const int tid = threadIdx.x;
  float f = fin[tid];
  int v = iin[tid];
  long long l = lin[tid];
  double d = din[tid];
  kiln::f16 h{hin[tid]};
  kiln::bf16 bh = kiln::cvt<kiln::bf16>(kiln::cvt<float>(h));
  bool b = bin[tid] != 0;
  for (int m = 16; m >= 1; m /= 2) {
    f += kiln::shfl_xor(f, m);
    v += kiln::shfl_xor(v, m);
    l += kiln::shfl_xor(l, m);
    d += kiln::shfl_xor(d, m);
    h = kiln::cvt<kiln::f16>(kiln::fmax_nan(kiln::cvt<float>(h), kiln::cvt<float>(kiln::shfl_xor(h, m))));
    bh = kiln::cvt<kiln::bf16>(kiln::fmax_nan(kiln::cvt<float>(bh), kiln::cvt<float>(kiln::shfl_xor(bh, m))));
    const bool other = kiln::shfl_xor(b, m);  // outside the ||: every lane must reach the shuffle
    b = b || other;
  }
  fout[tid] = f;
  iout[tid] = v;
  lout[tid] = l;
  dout[tid] = d;
  hout[tid] = h.bits;
  bhout[tid] = bh.bits;
  bout[tid] = b ? 1 : 0;
  ids[2 * tid] = kiln::warp_id();
  ids[2 * tid + 1] = kiln::lane_id();
  perm[tid] = kiln::shfl_xor(tid, 5);
}

// ---- atomics: every thread of every block adds to one counter per type --------------------------------
extern "C" __global__ void prelude_atomics(int* icount, int* iold, float* fsum, double* dsum, long long* lsum,
                                           kiln::f16* hcount, unsigned short* hold, kiln::bf16* bcount,
                                           unsigned short* bold) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  iold[i] = kiln::atomic_add(icount, 1);
  kiln::atomic_add(fsum, static_cast<float>(i % 7));
  kiln::atomic_add(dsum, 0.25 * i);
  kiln::atomic_add(lsum, (1ll << 33) + i);
  hold[i] = kiln::atomic_add(hcount, kiln::cvt<kiln::f16>(1.0f)).bits;
#if __CUDA_ARCH__ >= 900
  if (i < 256)  // bf16 counts integers exactly up to 256
    bold[i] = kiln::atomic_add(bcount, kiln::cvt<kiln::bf16>(1.0f)).bits;
#endif
}

// ---- math: f32 and f64 functions, NaN rules -----------------------------------------------------------
extern "C" __global__ void prelude_math(const float* x, int n, float* out, const double* xd, double* outd,
                                        const float* pa, const float* pb, int npairs, float* nan_out,
                                        double* nan_outd) {
  const int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    const float v = x[i];
    out[6 * i + 0] = kiln::ex2(v);
    out[6 * i + 1] = kiln::exp_fast(v);
    out[6 * i + 2] = kiln::lg2(fabsf(v) + 0.001f);
    out[6 * i + 3] = kiln::log_fast(fabsf(v) + 0.001f);
    out[6 * i + 4] = kiln::rsqrt_fast(fabsf(v) + 0.001f);
    out[6 * i + 5] = kiln::sqrt_rn(fabsf(v));
    const double w = xd[i];
    outd[6 * i + 0] = kiln::ex2(w);
    outd[6 * i + 1] = kiln::exp_fast(w);
    outd[6 * i + 2] = kiln::lg2(fabs(w) + 0.001);
    outd[6 * i + 3] = kiln::log_fast(fabs(w) + 0.001);
    outd[6 * i + 4] = kiln::rsqrt_fast(fabs(w) + 0.001);
    outd[6 * i + 5] = kiln::sqrt_rn(fabs(w));
  }
  if (i < npairs) {
    const float a = pa[i], b = pb[i];
    nan_out[6 * i + 0] = kiln::max_propagate_nan(a, b);
    nan_out[6 * i + 1] = kiln::min_propagate_nan(a, b);
    nan_out[6 * i + 2] = kiln::max_ignore_nan(a, b);
    nan_out[6 * i + 3] = kiln::min_ignore_nan(a, b);
    nan_out[6 * i + 4] = kiln::fmax_nan(a, b);
    nan_out[6 * i + 5] = kiln::fmin_nan(a, b);
    const double ad = a, bd = b;
    nan_outd[6 * i + 0] = kiln::max_propagate_nan(ad, bd);
    nan_outd[6 * i + 1] = kiln::min_propagate_nan(ad, bd);
    nan_outd[6 * i + 2] = kiln::max_ignore_nan(ad, bd);
    nan_outd[6 * i + 3] = kiln::min_ignore_nan(ad, bd);
    nan_outd[6 * i + 4] = kiln::fmax_nan(ad, bd);
    nan_outd[6 * i + 5] = kiln::fmin_nan(ad, bd);
  }
}

// ---- block pointer ------------------------------------------------------------------------------------
extern "C" __global__ void prelude_block_ptr(kiln::BlockPtr<float, 2> bp, long long* out) {
  const kiln::i64 delta[2] = {16, -32};
  const kiln::BlockPtr<float, 2> moved = bp.advanced(delta).advanced(delta);
  out[0] = moved.off[0];
  out[1] = moved.off[1];
  out[2] = moved.shape[0];
  out[3] = moved.shape[1];
  out[4] = moved.stride[0];
  out[5] = moved.stride[1];
  out[6] = bp.off[0];  // advanced() leaves the original alone
  out[7] = moved.base == bp.base ? 1 : 0;
}
)";

std::shared_ptr<rt::LoadedKernel> load_kernel(const char* name) {
  static rt::CompileCache cache("");  // memory only: the test must not depend on a user's cache
  rt::CompileRequest req;
  req.source = std::string(prelude_source()) + kTestKernels;
  req.kernel_name = name;
  req.arch = rt::current_device().arch;
  return rt::LoadedKernel::load(cache.get(req));
}

void synchronize(const char* what) { KILN_CU_CHECK(cuCtxSynchronize, what); }

template <typename T> rt::DeviceBuffer poisoned(size_t count) {
  rt::DeviceBuffer b(count * sizeof(T));
  b.fill_bytes(0xff);  // NaN for floats, -1 for integers: every element must be written
  return b;
}

uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
float float_of(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

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

// ---- memory movement ------------------------------------------------------------------------------------

TEST(PreludeGpu, CpAsyncCopiesInBoundsChunksAndZeroFillsTheRest) {
  KILN_REQUIRE_GPU();
  std::mt19937 rng(404);
  std::vector<uint32_t> src(64 * 4);
  for (uint32_t& w : src)
    w = rng() | 1u;  // never zero, so a zero in the output can only come from the fill
  rt::DeviceBuffer dsrc = rt::DeviceBuffer::from_host(src);
  for (int valid : {0, 23, 64}) {
    rt::DeviceBuffer dout = poisoned<uint32_t>(64 * 7);
    rt::CUdeviceptr ps = dsrc.ptr(), po = dout.ptr();
    int v = valid;
    void* args[] = {&ps, &v, &po};
    load_kernel("prelude_cp_async")->launch(rt::Dim3{1}, rt::Dim3{64}, 0, args);
    synchronize("prelude_cp_async");
    std::vector<uint32_t> out = dout.to_host<uint32_t>();
    // Region of `words`-word chunks starting at word `first`: chunk i holds src[i*words ...] when i < valid.
    auto check_region = [&](int first, int words, const char* name) {
      for (int i = 0; i < 64; ++i)
        for (int w = 0; w < words; ++w) {
          uint32_t expected = i < valid ? src[i * words + w] : 0u;
          ASSERT_EQ(out[first + i * words + w], expected)
              << name << " chunk " << i << " word " << w << " with " << valid << " chunks in bounds";
        }
    };
    check_region(0, 4, "cp_async_16");
    check_region(64 * 4, 2, "cp_async_8");
    check_region(64 * 6, 1, "cp_async_4");
  }
}

TEST(PreludeGpu, VectorGlobalLoadsAndStoresMoveExactBytes) {
  KILN_REQUIRE_GPU();
  const int threads = 64, bytes = 1792 + threads * 2;
  std::mt19937 rng(505);
  std::vector<unsigned char> src(bytes + 64);
  for (unsigned char& c : src)
    c = static_cast<unsigned char>(rng());
  rt::DeviceBuffer dsrc = rt::DeviceBuffer::from_host(src), ddst = poisoned<unsigned char>(src.size());
  rt::CUdeviceptr ps = dsrc.ptr(), pd = ddst.ptr();
  void* args[] = {&ps, &pd};
  load_kernel("prelude_vector_copy")->launch(rt::Dim3{1}, rt::Dim3{threads}, 0, args);
  synchronize("prelude_vector_copy");
  std::vector<unsigned char> dst = ddst.to_host<unsigned char>();
  for (int i = 0; i < bytes; ++i)
    ASSERT_EQ(dst[i], src[i]) << "byte " << i;
  for (size_t i = bytes; i < dst.size(); ++i)
    ASSERT_EQ(dst[i], 0xff) << "byte " << i << " past the copied range was written";
}

// ---- conversions ----------------------------------------------------------------------------------------

// Inputs that exercise every rounding case: random bit patterns (all exponents, NaN, inf, f32 subnormals),
// values across the f16 range and overflow threshold, f16 subnormals, and exact ties.
std::vector<float> conversion_inputs(unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<float> x;
  std::uniform_real_distribution<float> wide(-70000.f, 70000.f), unit(-2.f, 2.f), tiny_exp(-26.f, -13.f);
  for (int i = 0; i < 20000; ++i) {
    x.push_back(float_of(static_cast<uint32_t>(rng())));
    x.push_back(wide(rng));
    x.push_back(unit(rng));
    x.push_back((rng() & 1 ? -1.f : 1.f) * std::exp2(tiny_exp(rng)));
  }
  const float specials[] = {0.f, -0.f, INFINITY, -INFINITY, NAN, -NAN, 65504.f, 65519.f, 65520.f, -65520.f,
                            1.f + 1.f / 2048, 1.f + 3.f / 2048,  // f16 ties: to even (down, then up)
                            1.f + 1.f / 256, 1.f + 3.f / 256,    // bf16 ties
                            std::ldexp(1.f, -25), std::ldexp(3.f, -25), std::ldexp(1.f, -24), std::ldexp(1.f, -14),
                            std::numeric_limits<float>::denorm_min(), std::numeric_limits<float>::max(),
                            -std::numeric_limits<float>::max(), 3.3895314e38f};
  x.insert(x.end(), std::begin(specials), std::end(specials));
  return x;
}

bool is_f16_nan(uint16_t h) { return (h & 0x7c00u) == 0x7c00u && (h & 0x3ffu) != 0; }
bool is_bf16_nan(uint16_t b) { return (b & 0x7f80u) == 0x7f80u && (b & 0x7fu) != 0; }

TEST(PreludeGpu, ConversionsMatchTheHostRoundingBitForBit) {
  KILN_REQUIRE_GPU();
  std::vector<float> x = conversion_inputs(606);
  const int n = static_cast<int>(x.size());
  rt::DeviceBuffer dx = rt::DeviceBuffer::from_host(x);
  rt::DeviceBuffer f16_bits = poisoned<uint16_t>(n), f16_back = poisoned<float>(n), bf16_bits = poisoned<uint16_t>(n),
                   bf16_back = poisoned<float>(n), tf32 = poisoned<uint32_t>(n), packed_f16 = poisoned<uint32_t>(n),
                   packed_bf16 = poisoned<uint32_t>(n), to_int = poisoned<int>(n),
                   f16_to_bf16 = poisoned<uint16_t>(n), bf16_to_double = poisoned<double>(n);
  rt::CUdeviceptr p[] = {dx.ptr(),        f16_bits.ptr(),   f16_back.ptr(), bf16_bits.ptr(),
                         bf16_back.ptr(), tf32.ptr(),       packed_f16.ptr(), packed_bf16.ptr(),
                         to_int.ptr(),    f16_to_bf16.ptr(), bf16_to_double.ptr()};
  int count = n;
  void* args[] = {&p[0], &count, &p[1], &p[2], &p[3], &p[4], &p[5], &p[6], &p[7], &p[8], &p[9], &p[10]};
  load_kernel("prelude_convert")->launch(rt::Dim3{static_cast<unsigned>((n + 255) / 256)}, rt::Dim3{256}, 0, args);
  synchronize("prelude_convert");

  std::vector<uint16_t> h = f16_bits.to_host<uint16_t>(), b = bf16_bits.to_host<uint16_t>(),
                        hb = f16_to_bf16.to_host<uint16_t>();
  std::vector<float> hback = f16_back.to_host<float>(), bback = bf16_back.to_host<float>();
  std::vector<uint32_t> t = tf32.to_host<uint32_t>(), ph = packed_f16.to_host<uint32_t>(),
                        pb = packed_bf16.to_host<uint32_t>();
  std::vector<int> ints = to_int.to_host<int>();
  std::vector<double> bd = bf16_to_double.to_host<double>();

  int bad = 0, tf32_checked = 0, int_checked = 0;
  auto report = [&](int i, const char* what, uint64_t got, uint64_t want) {
    if (++bad <= 10)
      ADD_FAILURE() << what << "(" << x[i] << " = 0x" << std::hex << bits_of(x[i]) << "): got 0x" << got
                    << ", expected 0x" << want << std::dec;
  };
  for (int i = 0; i < n; ++i) {
    const float v = x[i];
    const uint16_t want_h = float_to_f16_bits(v), want_b = float_to_bf16_bits(v);
    if (std::isnan(v)) {  // NaN payloads differ between host and device; NaN-ness must not
      if (!is_f16_nan(h[i]) || !std::isnan(hback[i]))
        report(i, "f16(NaN)", h[i], want_h);
      if (!is_bf16_nan(b[i]) || !std::isnan(bback[i]) || !is_bf16_nan(hb[i]) || !std::isnan(bd[i]))
        report(i, "bf16(NaN)", b[i], want_b);
      continue;
    }
    if (h[i] != want_h)
      report(i, "cvt<f16>", h[i], want_h);
    if (bits_of(hback[i]) != bits_of(f16_bits_to_float(want_h)))
      report(i, "cvt<float>(cvt<f16>)", bits_of(hback[i]), bits_of(f16_bits_to_float(want_h)));
    if (b[i] != want_b)
      report(i, "cvt<bf16>", b[i], want_b);
    if (bits_of(bback[i]) != bits_of(bf16_bits_to_float(want_b)))
      report(i, "cvt<float>(cvt<bf16>)", bits_of(bback[i]), bits_of(bf16_bits_to_float(want_b)));
    const uint16_t want_hb = float_to_bf16_bits(f16_bits_to_float(want_h));
    if (hb[i] != want_hb)
      report(i, "cvt<bf16>(f16)", hb[i], want_hb);
    if (bd[i] != static_cast<double>(bf16_bits_to_float(want_b)))
      report(i, "cvt<double>(bf16)", static_cast<uint64_t>(bd[i]), want_b);
    const uint32_t want_ph = want_h | (uint32_t{float_to_f16_bits(-v)} << 16);
    if (ph[i] != want_ph)
      report(i, "pack_f16x2(x, -x)", ph[i], want_ph);
    const uint32_t want_pb = want_b | (uint32_t{float_to_bf16_bits(-v)} << 16);
    if (pb[i] != want_pb)
      report(i, "pack_bf16x2(x, -x)", pb[i], want_pb);
    // tf32 = round to nearest, ties away from zero, on the top 19 bits; checked where the rounding cannot
    // overflow and the input is normal (the mma reads only the top 19 bits, so compare those).
    if (std::isnormal(v) && std::fabs(v) < 1e38f) {
      ++tf32_checked;
      const uint32_t want_t = (bits_of(v) + 0x1000u) & 0xffffe000u;
      if ((t[i] & 0xffffe000u) != want_t)
        report(i, "to_tf32", t[i], want_t);
    }
    // float -> int truncates toward zero (in range, where C defines it).
    if (std::fabs(v) < 2147483520.f) {
      ++int_checked;
      if (ints[i] != static_cast<int>(v))
        report(i, "cvt<int>", static_cast<uint32_t>(ints[i]), static_cast<uint32_t>(static_cast<int>(v)));
    }
  }
  EXPECT_EQ(bad, 0);
  EXPECT_GT(tf32_checked, n / 2);
  EXPECT_GT(int_checked, n / 2);
}

// ---- shuffles -------------------------------------------------------------------------------------------

TEST(PreludeGpu, ShflXorButterflyReducesEveryType) {
  KILN_REQUIRE_GPU();
  const int warps = 4, n = warps * 32;
  std::mt19937 rng(707);
  std::uniform_int_distribution<int> small(-1000, 1000);
  std::vector<float> f(n);
  std::vector<int> iv(n), flags(n, 0);
  std::vector<long long> l(n);
  std::vector<double> d(n);
  std::vector<uint16_t> h(n);
  for (int i = 0; i < n; ++i) {
    f[i] = static_cast<float>(small(rng));
    iv[i] = small(rng) * 1000;
    l[i] = (static_cast<long long>(small(rng)) << 34) + small(rng);  // both 32-bit halves matter
    d[i] = small(rng) / 1024.0;                                      // exact sums in any order
    h[i] = float_to_f16_bits(static_cast<float>(small(rng)) / 8.f);
  }
  flags[32 + 17] = 1;  // warp 1: one lane true; warp 3: all true; warps 0 and 2: all false
  std::fill(flags.begin() + 96, flags.end(), 1);

  rt::DeviceBuffer in[] = {rt::DeviceBuffer::from_host(f), rt::DeviceBuffer::from_host(iv),
                           rt::DeviceBuffer::from_host(l), rt::DeviceBuffer::from_host(d),
                           rt::DeviceBuffer::from_host(h), rt::DeviceBuffer::from_host(flags)};
  rt::DeviceBuffer out[] = {poisoned<float>(n),    poisoned<int>(n),      poisoned<long long>(n),
                            poisoned<double>(n),   poisoned<uint16_t>(n), poisoned<uint16_t>(n),
                            poisoned<int>(n),      poisoned<int>(2 * n),  poisoned<int>(n)};
  std::vector<rt::CUdeviceptr> ptrs;
  for (auto& b : in)
    ptrs.push_back(b.ptr());
  for (auto& b : out)
    ptrs.push_back(b.ptr());
  std::vector<void*> args;
  for (auto& p : ptrs)
    args.push_back(&p);
  load_kernel("prelude_shuffle")->launch(rt::Dim3{1}, rt::Dim3{n}, 0, args.data());
  synchronize("prelude_shuffle");

  std::vector<float> fo = out[0].to_host<float>();
  std::vector<int> io = out[1].to_host<int>(), bo = out[6].to_host<int>(), ids = out[7].to_host<int>(),
                   perm = out[8].to_host<int>();
  std::vector<long long> lo = out[2].to_host<long long>();
  std::vector<double> dout = out[3].to_host<double>();
  std::vector<uint16_t> ho = out[4].to_host<uint16_t>(), bho = out[5].to_host<uint16_t>();
  for (int w = 0; w < warps; ++w) {
    float fs = 0;
    int is = 0;
    long long ls = 0;
    double ds = 0;
    float hmax = -INFINITY;
    bool any = false;
    for (int lane = 0; lane < 32; ++lane) {
      const int i = w * 32 + lane;
      fs += f[i];
      is += iv[i];
      ls += l[i];
      ds += d[i];
      hmax = std::max(hmax, f16_bits_to_float(h[i]));
      any = any || flags[i] != 0;
    }
    const uint16_t bmax = float_to_bf16_bits(hmax);
    for (int lane = 0; lane < 32; ++lane) {
      const int i = w * 32 + lane;
      EXPECT_EQ(fo[i], fs) << "float sum, warp " << w << " lane " << lane;
      EXPECT_EQ(io[i], is) << "int sum, warp " << w << " lane " << lane;
      EXPECT_EQ(lo[i], ls) << "long long sum, warp " << w << " lane " << lane;
      EXPECT_EQ(dout[i], ds) << "double sum, warp " << w << " lane " << lane;
      EXPECT_EQ(ho[i], float_to_f16_bits(hmax)) << "f16 max, warp " << w << " lane " << lane;
      EXPECT_EQ(bho[i], bmax) << "bf16 max, warp " << w << " lane " << lane;
      EXPECT_EQ(bo[i], any ? 1 : 0) << "bool or, warp " << w << " lane " << lane;
      EXPECT_EQ(ids[2 * i], w) << "warp_id of thread " << i;
      EXPECT_EQ(ids[2 * i + 1], lane) << "lane_id of thread " << i;
      EXPECT_EQ(perm[i], w * 32 + (lane ^ 5)) << "shfl_xor(tid, 5) of thread " << i;
    }
  }
}

// ---- atomics --------------------------------------------------------------------------------------------

TEST(PreludeGpu, AtomicAddReturnsEveryOldValueOnce) {
  KILN_REQUIRE_GPU();
  const int blocks = 4, threads = 256, n = blocks * threads;
  rt::DeviceBuffer icount(sizeof(int)), fsum(sizeof(float)), dsum(sizeof(double)), lsum(sizeof(long long)),
      hcount(2), bcount(2);
  for (rt::DeviceBuffer* b : {&icount, &fsum, &dsum, &lsum, &hcount, &bcount})
    b->fill_bytes(0);  // counters start at zero (0 bits = 0 in every type)
  rt::DeviceBuffer iold = poisoned<int>(n), hold = poisoned<uint16_t>(n), bold = poisoned<uint16_t>(n);
  rt::CUdeviceptr p[] = {icount.ptr(), iold.ptr(), fsum.ptr(),   dsum.ptr(), lsum.ptr(),
                         hcount.ptr(), hold.ptr(), bcount.ptr(), bold.ptr()};
  void* args[] = {&p[0], &p[1], &p[2], &p[3], &p[4], &p[5], &p[6], &p[7], &p[8]};
  load_kernel("prelude_atomics")->launch(rt::Dim3{blocks}, rt::Dim3{threads}, 0, args);
  synchronize("prelude_atomics");

  EXPECT_EQ(icount.to_host<int>()[0], n);
  std::vector<int> olds = iold.to_host<int>();
  std::sort(olds.begin(), olds.end());
  for (int i = 0; i < n; ++i)
    ASSERT_EQ(olds[i], i) << "int atomic_add must return each count 0..n-1 exactly once";
  float fwant = 0;
  double dwant = 0;
  long long lwant = 0;
  for (int i = 0; i < n; ++i) {
    fwant += static_cast<float>(i % 7);
    dwant += 0.25 * i;
    lwant += (1ll << 33) + i;
  }
  EXPECT_EQ(fsum.to_host<float>()[0], fwant);
  EXPECT_EQ(dsum.to_host<double>()[0], dwant);
  EXPECT_EQ(lsum.to_host<long long>()[0], lwant);

  // f16 holds every integer up to 2048 exactly: the old values are 0, 1, ..., n-1 in some order.
  EXPECT_EQ(f16_bits_to_float(hcount.to_host<uint16_t>()[0]), static_cast<float>(n));
  std::vector<float> hold_values;
  for (uint16_t bits : hold.to_host<uint16_t>())
    hold_values.push_back(f16_bits_to_float(bits));
  std::sort(hold_values.begin(), hold_values.end());
  for (int i = 0; i < n; ++i)
    ASSERT_EQ(hold_values[i], static_cast<float>(i)) << "f16 atomic_add old values";

  if (rt::current_device().cc_major >= 9) {
    EXPECT_EQ(bf16_bits_to_float(bcount.to_host<uint16_t>()[0]), 256.f);
    std::vector<uint16_t> bolds = bold.to_host<uint16_t>();
    std::vector<float> bvalues;
    for (int i = 0; i < 256; ++i)
      bvalues.push_back(bf16_bits_to_float(bolds[i]));
    std::sort(bvalues.begin(), bvalues.end());
    for (int i = 0; i < 256; ++i)
      ASSERT_EQ(bvalues[i], static_cast<float>(i)) << "bf16 atomic_add old values";
  }
}

// ---- math -----------------------------------------------------------------------------------------------

TEST(PreludeGpu, MathIsWithinItsDocumentedErrorAndNanRulesHold) {
  KILN_REQUIRE_GPU();
  std::mt19937 rng(808);
  std::uniform_real_distribution<float> dist(-20.f, 20.f);
  const int n = 4096;
  std::vector<float> x(n);
  std::vector<double> xd(n);
  for (int i = 0; i < n; ++i) {
    x[i] = dist(rng);
    xd[i] = static_cast<double>(dist(rng)) * 3.0;
  }
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = INFINITY;
  std::vector<float> pa = {nan, 1.f, nan, -inf, 2.f, -3.f, inf, nan, 5.f}, pb = {1.f, nan, nan, 7.f, -2.f, -4.f, nan,
                                                                                 -inf, 5.f};
  for (int i = 0; i < 64; ++i) {
    pa.push_back(dist(rng));
    pb.push_back(i % 3 == 0 ? nan : dist(rng));
  }
  const int npairs = static_cast<int>(pa.size());
  rt::DeviceBuffer dx = rt::DeviceBuffer::from_host(x), dxd = rt::DeviceBuffer::from_host(xd),
                   dpa = rt::DeviceBuffer::from_host(pa), dpb = rt::DeviceBuffer::from_host(pb),
                   out = poisoned<float>(6 * n), outd = poisoned<double>(6 * n), nan_out = poisoned<float>(6 * npairs),
                   nan_outd = poisoned<double>(6 * npairs);
  rt::CUdeviceptr p[] = {dx.ptr(), out.ptr(), dxd.ptr(), outd.ptr(), dpa.ptr(), dpb.ptr(), nan_out.ptr(), nan_outd.ptr()};
  int count = n, pairs = npairs;
  void* args[] = {&p[0], &count, &p[1], &p[2], &p[3], &p[4], &p[5], &pairs, &p[6], &p[7]};
  load_kernel("prelude_math")->launch(rt::Dim3{n / 256}, rt::Dim3{256}, 0, args);
  synchronize("prelude_math");

  std::vector<float> o = out.to_host<float>();
  std::vector<double> od = outd.to_host<double>();
  // Approximate MUFU results: ~2 ulp of f32, plus the rounding of x * log2(e) for exp_fast.
  auto near = [](double got, double want, double rel) { return std::fabs(got - want) <= rel * std::max(1.0, std::fabs(want)); };
  for (int i = 0; i < n; ++i) {
    const double v = x[i], a = std::fabs(x[i]) + 0.001f;
    EXPECT_TRUE(near(o[6 * i + 0], std::exp2(v), 1e-6)) << "ex2(" << v << ") = " << o[6 * i + 0];
    EXPECT_TRUE(near(o[6 * i + 1], std::exp(v), 8e-6)) << "exp_fast(" << v << ") = " << o[6 * i + 1];
    EXPECT_TRUE(near(o[6 * i + 2], std::log2(a), 1e-6)) << "lg2(" << a << ") = " << o[6 * i + 2];
    EXPECT_TRUE(near(o[6 * i + 3], std::log(a), 1e-6)) << "log_fast(" << a << ") = " << o[6 * i + 3];
    EXPECT_TRUE(near(o[6 * i + 4], 1.0 / std::sqrt(a), 1e-6)) << "rsqrt_fast(" << a << ") = " << o[6 * i + 4];
    EXPECT_EQ(o[6 * i + 5], std::sqrt(std::fabs(x[i]))) << "sqrt_rn is correctly rounded";
    const double w = xd[i], ad = std::fabs(xd[i]) + 0.001;
    EXPECT_TRUE(near(od[6 * i + 0], std::exp2(w), 1e-14)) << "ex2(double " << w << ")";
    EXPECT_TRUE(near(od[6 * i + 1], std::exp(w), 1e-14)) << "exp_fast(double " << w << ")";
    EXPECT_TRUE(near(od[6 * i + 2], std::log2(ad), 1e-14)) << "lg2(double " << ad << ")";
    EXPECT_TRUE(near(od[6 * i + 3], std::log(ad), 1e-14)) << "log_fast(double " << ad << ")";
    EXPECT_TRUE(near(od[6 * i + 4], 1.0 / std::sqrt(ad), 1e-14)) << "rsqrt_fast(double " << ad << ")";
    EXPECT_EQ(od[6 * i + 5], std::sqrt(std::fabs(xd[i]))) << "sqrt_rn(double) is correctly rounded";
  }

  std::vector<float> no = nan_out.to_host<float>();
  std::vector<double> nod = nan_outd.to_host<double>();
  auto same = [](double got, double want) { return std::isnan(want) ? std::isnan(got) : got == want; };
  for (int i = 0; i < npairs; ++i) {
    const double a = pa[i], b = pb[i];
    const bool any_nan = std::isnan(a) || std::isnan(b);
    const double want[6] = {any_nan ? NAN : std::max(a, b), any_nan ? NAN : std::min(a, b), std::fmax(a, b),
                            std::fmin(a, b), std::fmax(a, b), std::fmin(a, b)};
    const char* names[6] = {"max_propagate_nan", "min_propagate_nan", "max_ignore_nan",
                            "min_ignore_nan",    "fmax_nan",          "fmin_nan"};
    for (int k = 0; k < 6; ++k) {
      EXPECT_TRUE(same(no[6 * i + k], want[k])) << names[k] << "(" << a << ", " << b << ") = " << no[6 * i + k];
      EXPECT_TRUE(same(nod[6 * i + k], want[k])) << names[k] << "(double " << a << ", " << b << ") = " << nod[6 * i + k];
    }
  }
}

// ---- block pointer --------------------------------------------------------------------------------------

// Mirrors kiln::BlockPtr<float, 2> as the kernel receives it (a pointer and three i64[2]).
struct HostBlockPtr2 {
  uint64_t base;
  int64_t shape[2], stride[2], off[2];
};

TEST(PreludeGpu, BlockPtrAdvancedMovesOnlyTheOffsets) {
  KILN_REQUIRE_GPU();
  rt::DeviceBuffer storage(1024), out = poisoned<long long>(8);
  HostBlockPtr2 bp{storage.ptr(), {300, 500}, {500, 1}, {64, 128}};
  rt::CUdeviceptr po = out.ptr();
  void* args[] = {&bp, &po};
  load_kernel("prelude_block_ptr")->launch(rt::Dim3{1}, rt::Dim3{1}, 0, args);
  synchronize("prelude_block_ptr");
  std::vector<long long> o = out.to_host<long long>();
  const std::vector<long long> want = {64 + 32, 128 - 64, 300, 500, 500, 1, 64, 1};
  EXPECT_EQ(o, want);
}

} // namespace
} // namespace kiln
