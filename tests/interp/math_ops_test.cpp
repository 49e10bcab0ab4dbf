// tanh, sigmoid, erf, sin, cos and pow in the interpreter, through small DSL kernels, against the std::
// functions: random inputs plus edge values (±0, ±inf, NaN, large |x|, negative bases for pow), for every
// float dtype, on tiles and on scalars. The rule (dsl/scalar_eval.h): the op computes in double and rounds
// once to the dtype, so the interpreter must match std::fn(double) rounded once, to within one rounding (the
// sigmoid reference is computed in long double from the plain 1 / (1 + exp(-x)) formula).
#include "dsl/dsl.h"
#include "dsl/interpreter.h"
#include "support/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace kiln;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr int64_t kN = 256; // one tile

struct MathOp {
  std::string name;
  std::function<Value(const Value&)> dsl;
  std::function<double(double)> ref;
};

double sigmoid_ref(double x) { return static_cast<double>(1.0L / (1.0L + std::exp(-static_cast<long double>(x)))); }

std::vector<MathOp> unary_ops() {
  return {
      {"tanh", [](const Value& x) { return kiln::tanh(x); }, [](double x) { return std::tanh(x); }},
      {"sigmoid", [](const Value& x) { return kiln::sigmoid(x); }, sigmoid_ref},
      {"erf", [](const Value& x) { return kiln::erf(x); }, [](double x) { return std::erf(x); }},
      {"sin", [](const Value& x) { return kiln::sin(x); }, [](double x) { return std::sin(x); }},
      {"cos", [](const Value& x) { return kiln::cos(x); }, [](double x) { return std::cos(x); }},
  };
}

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

// The tolerance, relative: one unit in the last place of the dtype (the result is rounded once from double),
// four for f64 (whose double computation itself rounds, a few times for sigmoid).
double ulp(DType t) {
  switch (t) {
  case DType::f64:
    return 0x1p-50;
  case DType::f32:
    return 0x1p-23;
  case DType::f16:
    return 0x1p-10;
  default:
    return 0x1p-7;
  }
}

// `got` is `ref` rounded to `t`: NaN for NaN, the same infinity, the same signed zero, else within one
// rounding of the dtype (relative, or absolute below the dtype's normal range).
void expect_matches(double got, double ref, DType t, const std::string& what) {
  if (std::isnan(ref)) {
    EXPECT_TRUE(std::isnan(got)) << what << ": got " << got << ", want NaN";
    return;
  }
  const double want = round_to(ref, t);
  if (std::isinf(want) || want == 0) {
    EXPECT_EQ(got, want) << what;
    EXPECT_EQ(std::signbit(got), std::signbit(want)) << what << ": the sign of " << want;
    return;
  }
  const double tiny = t == DType::f64 ? 0x1p-1022 : t == DType::f16 ? 0x1p-24 : 0x1p-126;
  EXPECT_LE(std::fabs(got - want), ulp(t) * std::max(std::fabs(want), tiny)) << what << ": got " << got << ", want " << want;
}

// Inputs for `t`: the edge values first, then random values in [-8, 8] (rounded to the dtype by the buffer).
std::vector<double> inputs(DType t, unsigned seed) {
  const double big = t == DType::f16 ? 60000 : t == DType::f64 ? 1e300 : 1e30;
  std::vector<double> v = {0.0,  -0.0, kInf, -kInf, kNaN, 1.0, -1.0, 0.5,  -0.5, 20.0, -20.0, 88.5, -88.5,
                           89.0, -89.0, 710.0, -710.0, 1000.0, -1000.0, big, -big, 1e-3, -1e-3, 3.140625};
  std::mt19937 rng(seed);
  std::uniform_real_distribution<double> dist(-8, 8);
  while (static_cast<int64_t>(v.size()) < kN)
    v.push_back(dist(rng));
  return v;
}

class MathOpsInterp : public ::testing::TestWithParam<DType> {};

TEST_P(MathOpsInterp, UnaryOpsOnTilesMatchStd) {
  const DType t = GetParam();
  const std::vector<double> xs = inputs(t, 17);
  for (const MathOp& m : unary_ops()) {
    KernelBuilder kb(m.name);
    Value x = kb.arg_ptr("x", t), y = kb.arg_ptr("y", t);
    Value offs = arange(0, kN);
    store(y + offs, m.dsl(load(x + offs)));
    Kernel k = kb.finish();
    HostBuffer hx(t, kN, "x"), hy(t, kN, "y");
    for (int64_t i = 0; i < kN; ++i) {
      hx.set(i, xs[static_cast<size_t>(i)]);
      hy.set(i, 12345);
    }
    interpret(k, {1, 1, 1}, {InterpArg::ptr(hx), InterpArg::ptr(hy)});
    for (int64_t i = 0; i < kN; ++i) {
      const double x_in = hx.get(i); // the input as the dtype holds it
      expect_matches(hy.get(i), m.ref(x_in), t, fmt::format("{}({}) in {}", m.name, x_in, dtype_name(t)));
    }
  }
}

TEST_P(MathOpsInterp, UnaryOpsOnScalarsMatchStd) {
  const DType t = GetParam();
  for (const MathOp& m : unary_ops()) {
    KernelBuilder kb(m.name + "_scalar");
    // Scalar arguments are i32, i64 or f32: the f32 scalar is converted to the dtype in the kernel.
    Value s = kb.arg("s", f32).to(t), y = kb.arg_ptr("y", t);
    store(y + arange(0, 1), broadcast_to(m.dsl(s), {1}));
    Kernel k = kb.finish();
    for (double v : {0.75, -2.5, -0.0, kInf, -kInf, kNaN, 40.0, -40.0}) {
      HostBuffer hy(t, 1, "y");
      const double s_in = round_to(round_to(v, DType::f32), t);
      interpret(k, {1, 1, 1}, {InterpArg::of_float(s_in), InterpArg::ptr(hy)});
      expect_matches(hy.get(0), m.ref(s_in), t, fmt::format("{}({}) of a scalar {}", m.name, s_in, dtype_name(t)));
    }
  }
}

TEST_P(MathOpsInterp, SigmoidAndTanhSaturateWithoutNaN) {
  const DType t = GetParam();
  KernelBuilder kb("saturate");
  Value x = kb.arg_ptr("x", t), y = kb.arg_ptr("y", t), z = kb.arg_ptr("z", t);
  Value offs = arange(0, 8);
  Value v = load(x + offs);
  store(y + offs, kiln::sigmoid(v));
  store(z + offs, kiln::tanh(v));
  Kernel k = kb.finish();
  const double big = t == DType::f16 ? 65504 : t == DType::f64 ? 1e308 : 3e38;
  const std::vector<double> xs = {big, -big, 1000, -1000, 800, -800, kInf, -kInf}; // exp(-800) is 0 in f64
  HostBuffer hx(t, 8, "x"), hy(t, 8, "y"), hz(t, 8, "z");
  for (int64_t i = 0; i < 8; ++i)
    hx.set(i, xs[static_cast<size_t>(i)]);
  interpret(k, {1, 1, 1}, {InterpArg::ptr(hx), InterpArg::ptr(hy), InterpArg::ptr(hz)});
  for (int64_t i = 0; i < 8; ++i) {
    const bool positive = xs[static_cast<size_t>(i)] > 0;
    EXPECT_EQ(hy.get(i), positive ? 1.0 : 0.0) << "sigmoid(" << xs[static_cast<size_t>(i)] << ")";
    EXPECT_EQ(hz.get(i), positive ? 1.0 : -1.0) << "tanh(" << xs[static_cast<size_t>(i)] << ")";
  }
}

TEST_P(MathOpsInterp, PowMatchesStd) {
  const DType t = GetParam();
  // (base, exponent) edge pairs: negative bases with integer and fractional exponents, zeros, infinities, NaN.
  std::vector<std::pair<double, double>> pairs = {
      {-2, 3},     {-2, 2},     {-2, 0.5},  {-2, -1},   {-0.5, -3}, {0.0, -1},  {-0.0, -1},  {-0.0, 3},
      {0.0, 0.0},  {kNaN, 0.0}, {1.0, kNaN}, {kNaN, 2}, {2, kNaN},  {2, kInf},  {0.5, kInf}, {2, -kInf},
      {-kInf, 3},  {-kInf, 2},  {kInf, -1}, {-1, kInf}, {10, 30},   {10, -30},  {1.5, 2.25}, {3, 0.5}};
  std::mt19937 rng(23);
  std::uniform_real_distribution<double> base(-4, 4), expo(-3, 3);
  while (static_cast<int64_t>(pairs.size()) < kN) {
    double e = expo(rng);
    pairs.push_back({base(rng), pairs.size() % 3 == 0 ? std::round(e) : e}); // a third integer exponents
  }
  KernelBuilder kb("pow");
  Value a = kb.arg_ptr("a", t), b = kb.arg_ptr("b", t), y = kb.arg_ptr("y", t), sq = kb.arg_ptr("sq", t);
  Value offs = arange(0, kN);
  Value va = load(a + offs);
  store(y + offs, kiln::pow(va, load(b + offs)));
  store(sq + offs, kiln::pow(va, 2)); // a literal exponent takes the tile's dtype
  Kernel k = kb.finish();
  HostBuffer ha(t, kN, "a"), hb(t, kN, "b"), hy(t, kN, "y"), hsq(t, kN, "sq");
  for (int64_t i = 0; i < kN; ++i) {
    ha.set(i, pairs[static_cast<size_t>(i)].first);
    hb.set(i, pairs[static_cast<size_t>(i)].second);
  }
  interpret(k, {1, 1, 1}, {InterpArg::ptr(ha), InterpArg::ptr(hb), InterpArg::ptr(hy), InterpArg::ptr(hsq)});
  for (int64_t i = 0; i < kN; ++i) {
    const double x = ha.get(i), e = hb.get(i);
    expect_matches(hy.get(i), std::pow(x, e), t, fmt::format("pow({}, {}) in {}", x, e, dtype_name(t)));
    expect_matches(hsq.get(i), std::pow(x, 2.0), t, fmt::format("pow({}, 2) in {}", x, dtype_name(t)));
  }
}

TEST_P(MathOpsInterp, PowOfScalars) {
  const DType t = GetParam();
  KernelBuilder kb("pow_scalar");
  Value s = kb.arg("s", f32).to(t), e = kb.arg("e", f32).to(t), y = kb.arg_ptr("y", t);
  store(y + arange(0, 1), broadcast_to(kiln::pow(s, e), {1}));
  Kernel k = kb.finish();
  for (auto [x, p] : std::vector<std::pair<double, double>>{{-3, 3}, {-3, 0.5}, {2, -2}, {-0.0, -1}, {kNaN, 0}}) {
    HostBuffer hy(t, 1, "y");
    interpret(k, {1, 1, 1}, {InterpArg::of_float(x), InterpArg::of_float(p), InterpArg::ptr(hy)});
    expect_matches(hy.get(0), std::pow(x, p), t, fmt::format("pow({}, {}) of scalars in {}", x, p, dtype_name(t)));
  }
}

// A max-reduction over a row whose tail lies past the tensor: padding with -inf leaves the max of the
// elements inside, even when they are all negative (zero padding would give 0).
TEST_P(MathOpsInterp, NegInfPaddingServesAMaxReduction) {
  const DType t = GetParam();
  const int R = 3, C = 5; // a (3, 5) tensor read as one (4, 8) block
  KernelBuilder kb("row_max");
  Value x = kb.arg_ptr("x", t), m = kb.arg_ptr("m", t), raw = kb.arg_ptr("raw", t);
  Value bp = make_block_ptr(x, {R, C}, {C, 1}, {0, 0}, {4, 8}, {1, 0});
  Value blk = load(bp, {0, 1}, Padding::NegInf);
  store(m + arange(0, 4), max(blk, 1));
  store(raw + arange(0, 4).expand_dims(1) * 8 + arange(0, 8).expand_dims(0), blk);
  Kernel k = kb.finish();
  HostBuffer hx(t, R * C, "x"), hm(t, 4, "m"), hraw(t, 32, "raw");
  std::mt19937 rng(5);
  std::uniform_real_distribution<double> dist(-9, -1); // all negative
  for (int64_t i = 0; i < R * C; ++i)
    hx.set(i, dist(rng));
  interpret(k, {1, 1, 1}, {InterpArg::ptr(hx), InterpArg::ptr(hm), InterpArg::ptr(hraw)});
  for (int i = 0; i < 4; ++i) {
    double want = -kInf;
    for (int j = 0; j < C && i < R; ++j)
      want = std::max(want, hx.get(i * C + j));
    EXPECT_EQ(hm.get(i), want) << "row " << i;
    for (int j = 0; j < 8; ++j) {
      if (i >= R || j >= C) {
        EXPECT_EQ(hraw.get(i * 8 + j), -kInf) << i << "," << j;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(dtypes, MathOpsInterp, ::testing::Values(DType::f16, DType::bf16, DType::f32, DType::f64),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

} // namespace
