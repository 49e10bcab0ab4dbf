// The device prelude (codegen/prelude/kiln_prelude.cuh) on a real GPU: cp.async with zero fill, vector global
// loads/stores, warp shuffles, atomics, block pointers (mma.sync: prelude_mma_gpu_test.cpp; conversions and
// math: prelude_numerics_gpu_test.cpp). Skipped, with the reason printed, where there is no CUDA driver or no
// NVRTC.
#include "gpu/gpu_skip.h"
#include "gpu/prelude_gpu_support.h"
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

using namespace testing_support;

// Test kernels, compiled after the prelude. Each uses the prelude the way generated code will.
const char* kTestKernels = R"(
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

std::shared_ptr<rt::LoadedKernel> load_kernel(const char* name) { return load_prelude_kernel(kTestKernels, name); }

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
