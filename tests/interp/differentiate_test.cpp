// dsl/differentiate.h in the interpreter: the derivative the builder derives for elementwise expressions
// (every op with a rule, composed, with constants and index tiles mixed in) against central differences of
// the same expression in double, at points away from kinks; and exact 1 and 0 for the identity and a
// constant.
#include "dsl/differentiate.h"
#include "dsl/dsl.h"
#include "dsl/interpreter.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

using namespace kiln;

namespace {

constexpr int64_t kN = 64;

struct Expression {
  std::string name;
  std::function<Value(const Value& x, const Value& index)> dsl; // index: (kN,) f32, 0 .. kN-1
  std::function<double(double x, double index)> ref;
};

std::vector<Expression> expressions() {
  return {
      {"softcap", [](const Value& x, const Value&) { return 5.0 * tanh(x * 0.2); },
       [](double x, double) { return 5 * std::tanh(x * 0.2); }},
      {"alibi_like", [](const Value& x, const Value& i) { return x + 0.5 * i; },
       [](double x, double i) { return x + 0.5 * i; }},
      {"exp_log", [](const Value& x, const Value&) { return exp(x * 0.3) + log(x * x + 1.0); },
       [](double x, double) { return std::exp(x * 0.3) + std::log(x * x + 1); }},
      {"exp2_log2_div",
       [](const Value& x, const Value& i) { return exp2(x * 0.25) / (i + 2.0) - log2(x * x + 2.0); },
       [](double x, double i) { return std::exp2(x * 0.25) / (i + 2) - std::log2(x * x + 2); }},
      {"quotient_of_x", [](const Value& x, const Value&) { return 3.0 / (x * x + 1.0); },
       [](double x, double) { return 3 / (x * x + 1); }},
      {"sqrt_rsqrt", [](const Value& x, const Value&) { return sqrt(x * x + 1.0) + rsqrt(x * x + 4.0); },
       [](double x, double) { return std::sqrt(x * x + 1) + 1 / std::sqrt(x * x + 4); }},
      {"sigmoid_erf", [](const Value& x, const Value&) { return sigmoid(x) * erf(x * 0.5); },
       [](double x, double) { return 1 / (1 + std::exp(-x)) * std::erf(x * 0.5); }},
      {"sin_cos", [](const Value& x, const Value&) { return sin(x) - cos(x * 2.0); },
       [](double x, double) { return std::sin(x) - std::cos(2 * x); }},
      {"log1p_expm1_abs", [](const Value& x, const Value&) { return log1p(abs(x)) + expm1(x * 0.1); },
       [](double x, double) { return std::log1p(std::abs(x)) + std::expm1(x * 0.1); }},
      {"pow_both", [](const Value& x, const Value&) { return pow(x * x + 1.0, x * 0.1 + 1.0); },
       [](double x, double) { return std::pow(x * x + 1, x * 0.1 + 1); }},
      {"where_min_max",
       [](const Value& x, const Value& i) {
         return where(i < 32.0, minimum(x, 1.0), maximum(x * 2.0, -1.0));
       },
       [](double x, double i) { return i < 32 ? std::min(x, 1.0) : std::max(x * 2, -1.0); }},
      {"fma_neg", [](const Value& x, const Value& i) { return fma(x, x, -x * i); },
       [](double x, double i) { return x * x - x * i; }},
      {"f16_round_trip", [](const Value& x, const Value&) { return (x * 3.0).to(f16).to(f32); },
       [](double x, double) { return 3 * x; }},
      {"shapes",
       [](const Value& x, const Value&) {
         return reshape(trans(broadcast_to(expand_dims(x, 0), {1, kN})), {kN}) * 2.0;
       },
       [](double x, double) { return 2 * x; }},
      {"step", [](const Value& x, const Value&) { return (x > 0.0).to(f32) * 4.0 + x; },
       [](double x, double) { return (x > 0 ? 4 : 0) + x; }},
  };
}

TEST(Differentiate, DerivativesMatchCentralDifferences) {
  for (const Expression& e : expressions()) {
    KernelBuilder kb("derivative_" + e.name);
    Value xs = kb.arg_ptr("x", f32), out = kb.arg_ptr("d", f32);
    Value offs = arange(0, kN);
    Value x = load(xs + offs);
    Value y = e.dsl(x, offs.to(f32));
    Value d = derivative_of(y, x, e.name); // empty: exactly 1
    store(out + offs, d.valid() ? broadcast_to(d, {kN}) : full({kN}, 1.0, f32));
    Kernel k = kb.finish();
    HostBuffer hx(DType::f32, kN, "x"), hd(DType::f32, kN, "d");
    for (int64_t i = 0; i < kN; ++i) // points from -3.1 to 3.2, away from the kinks at 0, 1, -0.5
      hx.set(i, -3.1 + 0.1 * static_cast<double>(i) + 0.0371);
    interpret(k, {1, 1, 1}, {InterpArg::ptr(hx), InterpArg::ptr(hd)});
    for (int64_t i = 0; i < kN; ++i) {
      const double x0 = hx.get(i), idx = static_cast<double>(i), h = 1e-6;
      const double fd = (e.ref(x0 + h, idx) - e.ref(x0 - h, idx)) / (2 * h);
      EXPECT_NEAR(hd.get(i), fd, 2e-4 * (1 + std::abs(fd))) << e.name << " at x = " << x0;
    }
  }
}

// Exactly 1 is an empty Value (no multiply for the caller to build): x itself, and x plus terms that do not
// depend on it; a value built after x that does not depend on it has derivative 0.
TEST(Differentiate, OneIsEmptyAndAConstantIsZero) {
  KernelBuilder kb("identity_and_constant");
  Value xs = kb.arg_ptr("x", f32), out = kb.arg_ptr("d", f32);
  Value offs = arange(0, kN);
  Value x = load(xs + offs);
  Value c = offs.to(f32) * 2.0; // built after x, yet independent of it
  EXPECT_FALSE(derivative_of(x, x, "identity").valid());
  EXPECT_FALSE(derivative_of(x + c - 1.0, x, "shift").valid());
  store(out + offs, broadcast_to(derivative_of(c * 3.0, x, "constant"), {kN}) + 7.0);
  Kernel k = kb.finish();
  HostBuffer hx(DType::f32, kN, "x"), hd(DType::f32, kN, "d");
  interpret(k, {1, 1, 1}, {InterpArg::ptr(hx), InterpArg::ptr(hd)});
  for (int64_t i = 0; i < kN; ++i)
    ASSERT_EQ(hd.get(i), 7.0) << i;
}

} // namespace
