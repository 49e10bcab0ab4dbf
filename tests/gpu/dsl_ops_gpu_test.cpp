// fma, log1p, expm1, block loads padded with any value, scans and sorts on the GPU against the interpreter
// (filter: *DslOpsGpu*). What must be exact: fma (one rounding on both sides, f16/bf16 through f32), every
// padded load and the maxima over -inf padded rows, integer scans, max/min scans (and user combines that
// select), and float cumsums, cumprods and user sums of inputs whose every prefix is exact in the dtype (so
// the GPU's order cannot matter). With tolerances: log1p/expm1 (CUDA's log1pf/expm1f are within a few ulp;
// relative to max(|interpreter|, 1): f64 1e-13, f32 1e-5, f16 2e-3, bf16 1.6e-2), f32/f64 cumsums and user
// sums of random reals (the GPU adds in f32 in its own order, the interpreter in double or left to right:
// 1e-5 / 1e-12 of the tile's sum of |x|) and cumprods of random reals (1e-4 / 1e-12 of the product). Sorts
// are exact, NaN, -0 and infinities among their inputs. Skips with the reason printed where no CUDA driver or
// NVRTC is usable.
#include "dsl/dsl.h"
#include "dsl/interpreter.h"
#include "gpu/gpu_skip.h"
#include "jit/jit_kernel.h"
#include "scan_cases.h"
#include "sort_cases.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

using namespace kiln;
using kiln_test::ScanCase;
using kiln_test::SortCase;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

void expect_same(double got, double want, const std::string& what) {
  if (std::isnan(want)) {
    EXPECT_TRUE(std::isnan(got)) << what << ": GPU " << got << ", interpreter NaN";
    return;
  }
  EXPECT_EQ(got, want) << what;
}

// ---- fma, log1p, expm1, padding ----

constexpr int64_t kN = 1024;

// out = [fma(x, e, x), fma(x, 3, -1), log1p(x), expm1(x)], 256 elements a program; m[r] = max of row r of a
// (rows, cols) view of x read as (16, 64) blocks padded with -inf; p = one (16, 64) block padded with 2.5.
Kernel ops_kernel(DType t) {
  KernelBuilder kb("dsl_ops_gpu");
  Value x = kb.arg_ptr("x", t), e = kb.arg_ptr("e", t), out = kb.arg_ptr("out", t), m = kb.arg_ptr("m", t);
  Value p = kb.arg_ptr("p", t), rows = kb.arg("rows", i32), cols = kb.arg("cols", i32);
  Value offs = program_id(0) * 256 + arange(0, 256);
  Value v = load(x + offs), w = load(e + offs);
  store(out + offs, kiln::fma(v, w, v));
  store(out + (offs + kN), kiln::fma(v, 3, -1));
  store(out + (offs + 2 * kN), kiln::log1p(v));
  store(out + (offs + 3 * kN), kiln::expm1(v));
  Value bp = make_block_ptr(x, {rows, cols}, {cols, 1}, {program_id(0) * 16, 0}, {16, 64}, {1, 0});
  store(m + (program_id(0) * 16 + arange(0, 16)), max(load(bp, {0, 1}, Padding::NegInf), 1));
  Value tile = arange(0, 16).expand_dims(1) * 64 + arange(0, 64).expand_dims(0);
  store(p + (program_id(0) * 1024 + tile), load(bp, {0, 1}, 2.5));
  return kb.finish();
}

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

class DslOpsGpuElementwise : public ::testing::TestWithParam<DType> {};

TEST_P(DslOpsGpuElementwise, FmaLog1pExpm1AndPaddingMatchInterpreter) {
  KILN_REQUIRE_GPU();
  const DType t = GetParam();
  const int64_t rows = 50, cols = 20; // 4 programs of 16 rows: rows 50..63 and cols 20..63 are padding
  std::mt19937 rng(7);
  std::uniform_real_distribution<double> dist(-3, 3);
  HostBuffer x(t, kN, "x"), e(t, kN, "e");
  const std::vector<double> edges = {0.0,   -0.0, kInf, -kInf, kNaN,  1e-6,
                                     -1e-6, -1.0, -2.0, 30.0,  -30.0, 1 + 0x1p-12};
  for (int64_t i = 0; i < kN; ++i) {
    const bool edge = i < static_cast<int64_t>(edges.size());
    x.set(i, edge ? edges[static_cast<size_t>(i)] : dist(rng));
    e.set(i, edge ? 1 + 0x1p-12 : dist(rng));
  }
  HostBuffer out_i(t, 4 * kN, "out"), out_g(t, 4 * kN, "out"), m_i(t, 64, "m"), m_g(t, 64, "m");
  HostBuffer p_i(t, 4 * 1024, "p"), p_g(t, 4 * 1024, "p");
  const Kernel k = ops_kernel(t);
  const Grid grid{4, 1, 1};
  interpret(k, grid,
            {InterpArg::ptr(x), InterpArg::ptr(e), InterpArg::ptr(out_i), InterpArg::ptr(m_i),
             InterpArg::ptr(p_i), InterpArg::of_int(rows), InterpArg::of_int(cols)});
  run_on_gpu(*JitKernel::compile(k), grid,
             {InterpArg::ptr(x), InterpArg::ptr(e), InterpArg::ptr(out_g), InterpArg::ptr(m_g),
              InterpArg::ptr(p_g), InterpArg::of_int(rows), InterpArg::of_int(cols)});
  const char* names[4] = {"fma(x, e, x)", "fma(x, 3, -1)", "log1p", "expm1"};
  const double tol = tolerance(t);
  double worst = 0;
  for (int op = 0; op < 4; ++op)
    for (int64_t i = 0; i < kN; ++i) {
      const double want = out_i.get(op * kN + i), got = out_g.get(op * kN + i);
      const std::string what =
          fmt::format("{} at x = {}, e = {} in {}", names[op], x.get(i), e.get(i), dtype_name(t));
      if (op < 2 || !std::isfinite(want)) { // fma rounds once on both sides; infinities and NaN must agree
        expect_same(got, want, what);
        continue;
      }
      const double err = std::fabs(got - want) / std::max(std::fabs(want), 1.0);
      worst = std::max(worst, err);
      EXPECT_LE(err, tol) << what << ": GPU " << got << ", interpreter " << want;
    }
  std::printf("log1p/expm1 %s: worst relative error %.3g (tolerance %.3g)\n",
              std::string(dtype_name(t)).c_str(), worst, tol);
  for (int64_t r = 0; r < 64; ++r)
    EXPECT_EQ(m_g.get(r), m_i.get(r)) << "row " << r << " max (rows past " << rows << " are -inf)";
  EXPECT_EQ(m_i.get(63), -kInf);
  for (int64_t i = 0; i < 4 * 1024; ++i)
    expect_same(p_g.get(i), p_i.get(i), fmt::format("element {} of the blocks padded with 2.5", i));
  EXPECT_EQ(p_i.get(4 * 1024 - 1), 2.5);
}

INSTANTIATE_TEST_SUITE_P(dtypes, DslOpsGpuElementwise,
                         ::testing::Values(DType::f16, DType::bf16, DType::f32, DType::f64),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(DslOpsGpuPadding, IntegerBlockPaddedWithMinusOne) {
  KILN_REQUIRE_GPU();
  KernelBuilder kb("int_padding");
  Value x = kb.arg_ptr("x", i32), y = kb.arg_ptr("y", i32), n = kb.arg("n", i32);
  Value bp = make_block_ptr(x, {n}, {1}, {program_id(0) * 64}, {64}, {0});
  store(y + (program_id(0) * 64 + arange(0, 64)), load(bp, {0}, -1));
  const Kernel k = kb.finish();
  HostBuffer hx(i32, 128, "x"), y_i(i32, 128, "y"), y_g(i32, 128, "y");
  for (int64_t i = 0; i < 128; ++i)
    hx.set(i, static_cast<double>(i * 3));
  interpret(k, {2, 1, 1}, {InterpArg::ptr(hx), InterpArg::ptr(y_i), InterpArg::of_int(100)});
  run_on_gpu(*JitKernel::compile(k), {2, 1, 1},
             {InterpArg::ptr(hx), InterpArg::ptr(y_g), InterpArg::of_int(100)});
  for (int64_t i = 0; i < 128; ++i)
    EXPECT_EQ(y_g.get(i), y_i.get(i)) << "element " << i;
  EXPECT_EQ(y_i.get(127), -1);
}

// ---- scans ----

class DslOpsGpuScan : public ::testing::TestWithParam<ScanCase> {};

TEST_P(DslOpsGpuScan, MatchesInterpreter) {
  KILN_REQUIRE_GPU();
  const ScanCase& c = GetParam();
  const Kernel k = kiln_test::scan_kernel(c);
  const auto jit = JitKernel::compile(k);
  for (bool reals : {false, true}) {
    const std::vector<double> xs = kiln_test::scan_inputs(c, 31, reals);
    HostBuffer x(c.dtype, c.numel(), "x"), y_i(c.dtype, c.numel(), "y"), y_g(c.dtype, c.numel(), "y");
    for (int64_t i = 0; i < c.numel(); ++i)
      x.set(i, xs[static_cast<size_t>(i)]);
    interpret(k, {1, 1, 1}, {InterpArg::ptr(x), InterpArg::ptr(y_i)});
    run_on_gpu(*jit, {1, 1, 1}, {InterpArg::ptr(x), InterpArg::ptr(y_g)});
    const bool exact = !reals || !is_float(c.dtype) || !(c.adds() || c.multiplies());
    // The tolerance of a sum of reals: a fraction of the sum of |x| over the whole tile (a bound on any
    // prefix); of a product, a fraction of the product (a rounding per factor: 1024 f32 ones are below 1e-4).
    double abs_sum = 0;
    for (double v : xs)
      abs_sum += std::fabs(v);
    const double rel = c.dtype == DType::f64 ? 1e-12 : c.multiplies() ? 1e-4 : 1e-5;
    for (int64_t i = 0; i < c.numel(); ++i) {
      const std::string what = fmt::format("{}{}: element {}", c.name(), reals ? " (random reals)" : "", i);
      if (exact)
        ASSERT_EQ(y_g.get(i), y_i.get(i)) << what;
      else
        ASSERT_NEAR(y_g.get(i), y_i.get(i), rel * (c.multiplies() ? std::fabs(y_i.get(i)) : abs_sum)) << what;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(cases, DslOpsGpuScan, ::testing::ValuesIn(kiln_test::scan_cases()),
                         [](const auto& info) { return info.param.name(); });

// A cumsum along rows of any length, 256 columns at a time, the total so far carried by the loop (a reduction
// and a scan share the scratch in every iteration); one program a row.
TEST(DslOpsGpuScanLoop, ChunkedCumsumMatchesInterpreter) {
  KILN_REQUIRE_GPU();
  KernelBuilder kb("chunked_cumsum");
  Value x = kb.arg_ptr("x", f32), y = kb.arg_ptr("y", f32), n = kb.arg("n", i32);
  Value row = program_id(0) * n;
  Value carry = scalar(0, f32);
  for_range(0, n, 256, [&](Value start) {
    Value offs = start + arange(0, 256);
    Value mask = offs < n;
    Value v = load(x + row + offs, mask, 0.0f);
    store(y + row + offs, cumsum(v, 0) + carry, mask);
    carry = carry + sum(v, 0);
  });
  const Kernel k = kb.finish();
  const int64_t R = 3, N = 1000;
  HostBuffer hx(f32, R * N, "x"), y_i(f32, R * N, "y"), y_g(f32, R * N, "y");
  for (int64_t i = 0; i < R * N; ++i)
    hx.set(i, static_cast<double>(i % 9) - 4); // integers: every prefix exact
  interpret(k, {R, 1, 1}, {InterpArg::ptr(hx), InterpArg::ptr(y_i), InterpArg::of_int(N)});
  run_on_gpu(*JitKernel::compile(k), {R, 1, 1},
             {InterpArg::ptr(hx), InterpArg::ptr(y_g), InterpArg::of_int(N)});
  for (int64_t i = 0; i < R * N; ++i)
    ASSERT_EQ(y_g.get(i), y_i.get(i)) << "element " << i;
}

// associative_scan (maximum as a user combine) on chunks of rows carried by a loop, one program a row.
TEST(DslOpsGpuScanLoop, ChunkedRunningMaxThroughAUserCombineMatchesInterpreter) {
  KILN_REQUIRE_GPU();
  const Kernel k = kiln_test::chunked_running_max_kernel();
  const int64_t R = 3, N = 1000;
  HostBuffer hx(i32, R * N, "x"), y_i(i32, R * N, "y"), y_g(i32, R * N, "y");
  for (int64_t i = 0; i < R * N; ++i)
    hx.set(i, static_cast<double>((i * 7919) % 20011) - 10000);
  interpret(k, {R, 1, 1}, {InterpArg::ptr(hx), InterpArg::ptr(y_i), InterpArg::of_int(N)});
  run_on_gpu(*JitKernel::compile(k), {R, 1, 1},
             {InterpArg::ptr(hx), InterpArg::ptr(y_g), InterpArg::of_int(N)});
  for (int64_t i = 0; i < R * N; ++i)
    ASSERT_EQ(y_g.get(i), y_i.get(i)) << "element " << i;
}

// ---- sort ----

// Exact: a sort only moves elements, and the GPU's network and the interpreter order them by the same total
// order (NaN last ascending, -0 before +0), so every element agrees (NaN with NaN).
class DslOpsGpuSort : public ::testing::TestWithParam<SortCase> {};

TEST_P(DslOpsGpuSort, MatchesInterpreter) {
  KILN_REQUIRE_GPU();
  const SortCase& c = GetParam();
  const Kernel k = kiln_test::sort_kernel(c);
  const std::vector<double> xs = kiln_test::sort_inputs(c, 43);
  HostBuffer x(c.dtype, c.numel(), "x"), y_i(c.dtype, c.numel(), "y"), y_g(c.dtype, c.numel(), "y");
  for (int64_t i = 0; i < c.numel(); ++i)
    x.set(i, xs[static_cast<size_t>(i)]);
  interpret(k, {1, 1, 1}, {InterpArg::ptr(x), InterpArg::ptr(y_i)});
  run_on_gpu(*JitKernel::compile(k), {1, 1, 1}, {InterpArg::ptr(x), InterpArg::ptr(y_g)});
  for (int64_t i = 0; i < c.numel(); ++i)
    ASSERT_TRUE(kiln_test::same_sorted_element(y_g.get(i), y_i.get(i)))
        << c.name() << ": element " << i << " is " << y_g.get(i) << " on the GPU, " << y_i.get(i)
        << " in the interpreter";
}

INSTANTIATE_TEST_SUITE_P(cases, DslOpsGpuSort, ::testing::ValuesIn(kiln_test::sort_cases()),
                         [](const auto& info) { return info.param.name(); });

} // namespace
