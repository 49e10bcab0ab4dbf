// fma, log1p and expm1 in the interpreter, through small DSL kernels, for every float dtype.
// fma rounds once: f32 exactly as std::fmaf (a case where a * b + c rounded twice differs is included), f64
// as std::fma, f16/bf16 as fmaf of the widened operands rounded to the dtype; operands broadcast and promote
// like
// `+`. log1p/expm1 compute in double and round once (dsl/scalar_eval.h), so they match std::log1p/expm1 to
// within one rounding, and stay accurate near 0 where log(1 + x) and exp(x) - 1 lose every digit.
#include "dsl/dsl.h"
#include "dsl/interpreter.h"
#include "support/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace kiln;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double round_to(double x, DType t) {
  switch (t) {
  case DType::f64:
    return x;
  case DType::f32:
    return static_cast<float>(x);
  case DType::f16:
    return f16_bits_to_float(float_to_f16_bits(static_cast<float>(x)));
  default:
    return bf16_bits_to_float(float_to_bf16_bits(static_cast<float>(x)));
  }
}

// The fma rule of the GPU path: one f32 rounding (then the dtype's), or one f64 rounding.
double fma_ref(double a, double b, double c, DType t) {
  if (t == DType::f64)
    return std::fma(a, b, c);
  return round_to(std::fma(static_cast<float>(a), static_cast<float>(b), static_cast<float>(c)), t);
}

void expect_same(double got, double want, const std::string& what) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << what << ": got " << got << ", want NaN";
    return;
  }
  EXPECT_EQ(got, want) << what;
  EXPECT_EQ(std::signbit(got), std::signbit(want)) << what << ": the sign";
}

// `got` is `ref` rounded to `t` to within one rounding (the test's rounding goes through f32 for f16/bf16).
void expect_within_one_rounding(double got, double ref, DType t, const std::string& what) {
  const double want = round_to(ref, t);
  if (std::isnan(want) || std::isinf(want) || want == 0)
    return expect_same(got, want, what);
  const double ulp = t == DType::f64   ? 0x1p-52
                     : t == DType::f32 ? 0x1p-23
                     : t == DType::f16 ? 0x1p-10
                                       : 0x1p-7;
  EXPECT_LE(std::fabs(got - want), ulp * std::fabs(want)) << what << ": got " << got << ", want " << want;
}

class FmaLog1pExpm1Interp : public ::testing::TestWithParam<DType> {};

// y = fma(a, b, c) on (64,) tiles; z = fma(a, 2, -1) with literals taking the tile's dtype.
TEST_P(FmaLog1pExpm1Interp, FmaRoundsOnce) {
  const DType t = GetParam();
  constexpr int64_t n = 64;
  KernelBuilder kb("fma");
  Value a = kb.arg_ptr("a", t), b = kb.arg_ptr("b", t), c = kb.arg_ptr("c", t);
  Value y = kb.arg_ptr("y", t), z = kb.arg_ptr("z", t);
  Value offs = arange(0, n);
  Value va = load(a + offs);
  store(y + offs, kiln::fma(va, load(b + offs), load(c + offs)));
  store(z + offs, kiln::fma(va, 2.0, -1.0));
  Kernel k = kb.finish();
  HostBuffer ha(t, n, "a"), hb(t, n, "b"), hc(t, n, "c"), hy(t, n, "y"), hz(t, n, "z");
  // Case 0: (1 + u)^2 - (1 + 2u) is u^2 exactly, which a product rounded first loses (u = 2^-12 in f32 and
  // f16/bf16, whose operands are exact in f32; 2^-27 in f64).
  const double u = t == DType::f64 ? 0x1p-27 : t == DType::f32 ? 0x1p-12 : 0x1p-6;
  std::vector<double> as = {1 + u, kInf, kNaN, 0.0, -0.0, 3.0}, bs = {1 + u, 0.0, 1.0, -1.0, 5.0, -2.0},
                      cs = {-(1 + 2 * u), 1.0, 1.0, -0.0, -0.0, 6.0};
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> dist(-4, 4);
  while (static_cast<int64_t>(as.size()) < n) {
    as.push_back(dist(rng));
    bs.push_back(dist(rng));
    cs.push_back(dist(rng));
  }
  for (int64_t i = 0; i < n; ++i) {
    ha.set(i, as[static_cast<size_t>(i)]);
    hb.set(i, bs[static_cast<size_t>(i)]);
    hc.set(i, cs[static_cast<size_t>(i)]);
  }
  interpret(
      k, {1, 1, 1},
      {InterpArg::ptr(ha), InterpArg::ptr(hb), InterpArg::ptr(hc), InterpArg::ptr(hy), InterpArg::ptr(hz)});
  for (int64_t i = 0; i < n; ++i) {
    const double x = ha.get(i), p = hb.get(i), q = hc.get(i);
    expect_same(hy.get(i), fma_ref(x, p, q, t), fmt::format("fma({}, {}, {}) in {}", x, p, q, dtype_name(t)));
    expect_same(hz.get(i), fma_ref(x, 2.0, -1.0, t), fmt::format("fma({}, 2, -1) in {}", x, dtype_name(t)));
  }
  if (t != DType::f16 && t != DType::bf16) { // the fused result is u^2, not the 0 of (1 + u)^2 rounded first
    EXPECT_EQ(hy.get(0), u * u) << dtype_name(t);
  }
  EXPECT_TRUE(std::isnan(hy.get(1))) << "inf * 0 + 1";
}

// Broadcasting: a (4, 8) tile times a row (8,) plus a scalar argument, as `a * row + s` broadcasts.
TEST_P(FmaLog1pExpm1Interp, FmaBroadcastsLikeAdd) {
  const DType t = GetParam();
  KernelBuilder kb("fma_broadcast");
  Value a = kb.arg_ptr("a", t), row = kb.arg_ptr("row", t), y = kb.arg_ptr("y", t);
  Value s = kb.arg("s", f32).to(t);
  Value rows = arange(0, 4).expand_dims(1), cols = arange(0, 8).expand_dims(0);
  Value va = load(a + (rows * 8 + cols)); // (4, 8)
  Value vr = load(row + arange(0, 8));    // (8,)
  store(y + (rows * 8 + cols), kiln::fma(va, vr, s));
  Kernel k = kb.finish();
  HostBuffer ha(t, 32, "a"), hr(t, 8, "row"), hy(t, 32, "y");
  for (int64_t i = 0; i < 32; ++i)
    ha.set(i, 0.25 * static_cast<double>(i) - 3);
  for (int64_t j = 0; j < 8; ++j)
    hr.set(j, 1.5 - 0.5 * static_cast<double>(j));
  interpret(k, {1, 1, 1},
            {InterpArg::ptr(ha), InterpArg::ptr(hr), InterpArg::ptr(hy), InterpArg::of_float(0.75)});
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 8; ++j)
      expect_same(hy.get(i * 8 + j), fma_ref(ha.get(i * 8 + j), hr.get(j), 0.75, t),
                  fmt::format("fma element ({}, {}) in {}", i, j, dtype_name(t)));
}

TEST_P(FmaLog1pExpm1Interp, Log1pAndExpm1MatchStd) {
  const DType t = GetParam();
  const double tiny = t == DType::f64 ? 1e-12 : t == DType::f32 ? 1e-6 : 1e-3;
  const std::vector<double> xs = {0.0, -0.0, tiny, -tiny, 1e-3,  -1e-3, 0.5,   -0.5,
                                  1.0, -1.0, -2.0, 10.0,  -10.0, kInf,  -kInf, kNaN};
  const int64_t n = 16;
  KernelBuilder kb("log1p_expm1");
  Value x = kb.arg_ptr("x", t), l = kb.arg_ptr("l", t), e = kb.arg_ptr("e", t);
  Value offs = arange(0, n);
  Value v = load(x + offs);
  store(l + offs, kiln::log1p(v));
  store(e + offs, kiln::expm1(v));
  Kernel k = kb.finish();
  HostBuffer hx(t, n, "x"), hl(t, n, "l"), he(t, n, "e");
  for (int64_t i = 0; i < n; ++i)
    hx.set(i, xs[static_cast<size_t>(i)]);
  interpret(k, {1, 1, 1}, {InterpArg::ptr(hx), InterpArg::ptr(hl), InterpArg::ptr(he)});
  for (int64_t i = 0; i < n; ++i) {
    const double v_in = hx.get(i);
    expect_within_one_rounding(hl.get(i), std::log1p(v_in), t,
                               fmt::format("log1p({}) in {}", v_in, dtype_name(t)));
    expect_within_one_rounding(he.get(i), std::expm1(v_in), t,
                               fmt::format("expm1({}) in {}", v_in, dtype_name(t)));
  }
  // Near 0 both are x to within the dtype's precision, where log(1 + x) would be 0 or a rounding of 1 + x.
  EXPECT_NEAR(hl.get(2) / hx.get(2), 1.0, 2 * tiny) << "log1p(" << hx.get(2) << ")";
  EXPECT_NEAR(he.get(2) / hx.get(2), 1.0, 2 * tiny) << "expm1(" << hx.get(2) << ")";
}

TEST_P(FmaLog1pExpm1Interp, OnScalars) {
  const DType t = GetParam();
  KernelBuilder kb("scalar_ops");
  Value s = kb.arg("s", f32).to(t), y = kb.arg_ptr("y", t);
  store(y + arange(0, 1), broadcast_to(kiln::fma(kiln::log1p(s), kiln::expm1(s), s), {1}));
  Kernel k = kb.finish();
  for (double v : {0.5, -0.25, 3.0}) {
    HostBuffer hy(t, 1, "y");
    interpret(k, {1, 1, 1}, {InterpArg::of_float(v), InterpArg::ptr(hy)});
    const double sv = round_to(v, t);
    const double want = fma_ref(round_to(std::log1p(sv), t), round_to(std::expm1(sv), t), sv, t);
    // Within a few roundings: the test rounds log1p and expm1 through f32 for f16/bf16, the interpreter
    // directly.
    EXPECT_NEAR(hy.get(0), want,
                4 *
                    (t == DType::f64   ? 0x1p-52
                     : t == DType::f32 ? 0x1p-23
                                       : 0x1p-7) *
                    std::fabs(want))
        << "fma(log1p(s), expm1(s), s) for s = " << v << " in " << dtype_name(t);
  }
}

INSTANTIATE_TEST_SUITE_P(dtypes, FmaLog1pExpm1Interp,
                         ::testing::Values(DType::f16, DType::bf16, DType::f32, DType::f64),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

} // namespace
