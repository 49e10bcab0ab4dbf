// tanh, sigmoid, erf, sin, cos and pow on the GPU against the interpreter, in one kernel per float dtype,
// and a max-reduction over a block padded with -inf. The interpreter computes each op in double and rounds
// once; the GPU calls CUDA's tanhf/sinf/cosf/powf and kiln's erf_f32 (codegen/prelude/kiln_erf.cuh; f16/bf16
// through f32) and their double versions, whose documented errors are a few ulp. Tolerances, relative to max(|interpreter|, 1) (an absolute
// error near zero, where sin/cos/tanh/erf cross it):
//   f64 1e-13, f32 1e-5, f16 2e-3 (two f16 ulp: the f32 result may round the other way), bf16 1.6e-2.
// Non-finite results (pow's NaN for a negative base, ±inf, the signs of infinities) must match exactly.
// Skips with the reason printed where no CUDA driver or NVRTC is usable.
#include "dsl/dsl.h"
#include "dsl/interpreter.h"
#include "gpu/gpu_skip.h"
#include "jit/jit_kernel.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace kiln;

namespace {

constexpr int64_t kN = 1024;
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr int kOps = 6; // tanh, sigmoid, erf, sin, cos, pow

double tolerance(DType t) {
  switch (t) {
  case DType::f64:
    return 1e-13;
  case DType::f32:
    return 1e-5;
  case DType::f16:
    return 2e-3;
  default:
    return 1.6e-2;
  }
}

// out[k * n + i] = op_k(x[i]) (pow: x[i] ** e[i]); m[r] = max of row r of a (rows, cols) view of x, read as
// (16, 64) blocks padded with -inf.
Kernel math_kernel(DType t) {
  KernelBuilder kb("math_ops_gpu");
  Value x = kb.arg_ptr("x", t), e = kb.arg_ptr("e", t), out = kb.arg_ptr("out", t), m = kb.arg_ptr("m", t);
  Value rows = kb.arg("rows", i32), cols = kb.arg("cols", i32);
  Value offs = program_id(0) * 256 + arange(0, 256);
  Value v = load(x + offs), w = load(e + offs);
  store(out + offs, kiln::tanh(v));
  store(out + (offs + kN), kiln::sigmoid(v));
  store(out + (offs + 2 * kN), kiln::erf(v));
  store(out + (offs + 3 * kN), kiln::sin(v));
  store(out + (offs + 4 * kN), kiln::cos(v));
  store(out + (offs + 5 * kN), kiln::pow(v, w));
  Value bp = make_block_ptr(x, {rows, cols}, {cols, 1}, {program_id(0) * 16, 0}, {16, 64}, {1, 0});
  store(m + (program_id(0) * 16 + arange(0, 16)), max(load(bp, {0, 1}, Padding::NegInf), 1));
  return kb.finish();
}

class MathOpsGpu : public ::testing::TestWithParam<DType> {};

TEST_P(MathOpsGpu, MatchesInterpreter) {
  KILN_REQUIRE_GPU();
  const DType t = GetParam();
  const int64_t rows = 50, cols = 20; // 4 programs of 16 rows: rows 50..63 and cols 20..63 pad with -inf
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> dist(-6, 6), expo(-3, 3);
  HostBuffer x(t, kN, "x"), e(t, kN, "e");
  const std::vector<double> edges = {0.0, -0.0, kInf, -kInf, kNaN, 30.0, -30.0, 200.0, -200.0, -2.0, -2.0, -0.5};
  const std::vector<double> edge_exps = {2.0, 3.0, 0.0, 1.0, 2.0, 0.5, 2.0, 1.0, 2.0, 3.0, 0.5, -1.0};
  for (int64_t i = 0; i < kN; ++i) {
    const bool edge = i < static_cast<int64_t>(edges.size());
    x.set(i, edge ? edges[static_cast<size_t>(i)] : dist(rng));
    e.set(i, edge ? edge_exps[static_cast<size_t>(i)] : (i % 3 == 0 ? std::round(expo(rng)) : expo(rng)));
  }
  HostBuffer out_i(t, kOps * kN, "out"), out_g(t, kOps * kN, "out"), m_i(t, 64, "m"), m_g(t, 64, "m");
  const Kernel k = math_kernel(t);
  const Grid grid{4, 1, 1};
  interpret(k, grid, {InterpArg::ptr(x), InterpArg::ptr(e), InterpArg::ptr(out_i), InterpArg::ptr(m_i),
                      InterpArg::of_int(rows), InterpArg::of_int(cols)});
  run_on_gpu(*JitKernel::compile(k), grid,
             {InterpArg::ptr(x), InterpArg::ptr(e), InterpArg::ptr(out_g), InterpArg::ptr(m_g),
              InterpArg::of_int(rows), InterpArg::of_int(cols)});
  const char* names[kOps] = {"tanh", "sigmoid", "erf", "sin", "cos", "pow"};
  const double tol = tolerance(t);
  double worst[kOps] = {};
  for (int op = 0; op < kOps; ++op)
    for (int64_t i = 0; i < kN; ++i) {
      const double want = out_i.get(op * kN + i), got = out_g.get(op * kN + i);
      const std::string what = fmt::format("{}({}{}) in {}", names[op], x.get(i),
                                           op == 5 ? fmt::format(", {}", e.get(i)) : std::string(), dtype_name(t));
      if (!std::isfinite(want)) {
        EXPECT_TRUE(std::isnan(want) ? std::isnan(got) : got == want) << what << ": GPU " << got << ", interpreter " << want;
        continue;
      }
      const double err = std::fabs(got - want) / std::max(std::fabs(want), 1.0);
      worst[op] = std::max(worst[op], err);
      EXPECT_LE(err, tol) << what << ": GPU " << got << ", interpreter " << want;
    }
  for (int op = 0; op < kOps; ++op)
    std::printf("%s %s: worst relative error %.3g (tolerance %.3g)\n", names[op], std::string(dtype_name(t)).c_str(),
                worst[op], tol);
  for (int64_t r = 0; r < 64; ++r) // a max is exact: the same element on both sides
    EXPECT_EQ(m_g.get(r), m_i.get(r)) << "row " << r << " max (rows past " << rows << " are -inf)";
  EXPECT_EQ(m_i.get(63), -kInf);
}

INSTANTIATE_TEST_SUITE_P(dtypes, MathOpsGpu, ::testing::Values(DType::f16, DType::bf16, DType::f32, DType::f64),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

} // namespace
