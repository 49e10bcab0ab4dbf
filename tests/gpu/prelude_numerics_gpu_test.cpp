// The device prelude's numerics (codegen/prelude/kiln_prelude.cuh) on a real GPU: conversions against
// support/half.h bit for bit (f16, bf16, tf32, packed pairs, float to int), and the math functions within
// their documented error with the NaN rules of max and min. Skipped, with the reason printed, where there is
// no CUDA driver or no NVRTC.
#include "gpu/gpu_skip.h"
#include "gpu/prelude_gpu_support.h"
#include "support/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace kiln {
namespace {

using namespace testing_support;

// Test kernels, compiled after the prelude. Each uses the prelude the way generated code will.
const char* kTestKernels = R"(
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
)";

std::shared_ptr<rt::LoadedKernel> load_kernel(const char* name) { return load_prelude_kernel(kTestKernels, name); }

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

} // namespace
} // namespace kiln
