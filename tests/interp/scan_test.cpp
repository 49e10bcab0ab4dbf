// Scans (cumsum, cummax, cummin; reverse) in the interpreter, over the shared cases of tests/scan_cases.h:
// 1-D and 2-D tiles, axis 0 and 1, tiles and lines shorter than a warp, every dtype family. Inputs are chosen
// so that every prefix is exact in the dtype, and the interpreter must equal the reference exactly; f32/f64
// random reals too (the interpreter accumulates in double and rounds each prefix once, as the reference
// does). Then the rules at the edges: NaN in cummax/cummin, i32 sums that wrap, a cumsum over a row in chunks
// carried by a loop, errors.
#include "dsl/dsl.h"
#include "dsl/interpreter.h"
#include "scan_cases.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

using namespace kiln;
using kiln_test::ScanCase;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

std::vector<double> run_case(const ScanCase& c, const std::vector<double>& xs) {
  const Kernel k = kiln_test::scan_kernel(c);
  HostBuffer x(c.dtype, c.numel(), "x"), y(c.dtype, c.numel(), "y");
  for (int64_t i = 0; i < c.numel(); ++i)
    x.set(i, xs[static_cast<size_t>(i)]);
  interpret(k, {1, 1, 1}, {InterpArg::ptr(x), InterpArg::ptr(y)});
  std::vector<double> out(static_cast<size_t>(c.numel()));
  for (int64_t i = 0; i < c.numel(); ++i)
    out[static_cast<size_t>(i)] = y.get(i);
  return out;
}

class ScanInterp : public ::testing::TestWithParam<ScanCase> {};

TEST_P(ScanInterp, MatchesTheReferenceExactly) {
  const ScanCase& c = GetParam();
  for (bool reals : {false, true}) {
    const std::vector<double> xs = kiln_test::scan_inputs(c, 29, reals);
    std::vector<double> want = kiln_test::scan_reference(c, xs);
    if (c.dtype == DType::f32) // the reference accumulates in double too; the buffer rounds once
      for (double& w : want)
        w = static_cast<float>(w);
    const std::vector<double> got = run_case(c, xs);
    for (size_t i = 0; i < got.size(); ++i)
      ASSERT_EQ(got[i], want[i]) << c.name() << (reals ? " (random reals)" : "") << ": element " << i;
  }
}

INSTANTIATE_TEST_SUITE_P(cases, ScanInterp, ::testing::ValuesIn(kiln_test::scan_cases()),
                         [](const auto& info) { return info.param.name(); });

TEST(ScanInterpEdges, MaxAndMinIgnoreNaNUntilANumberComes) {
  for (ReduceOp r : {ReduceOp::Max, ReduceOp::Min}) {
    const ScanCase c{DType::f32, {8}, 0, r};
    const std::vector<double> got = run_case(c, {kNaN, kNaN, 2, kNaN, 5, -1, kNaN, 3});
    EXPECT_TRUE(std::isnan(got[0]) && std::isnan(got[1])) << c.name() << ": NaN until a number comes";
    const std::vector<double> want =
        r == ReduceOp::Max ? std::vector<double>{2, 2, 5, 5, 5, 5} : std::vector<double>{2, 2, 2, -1, -1, -1};
    for (size_t i = 2; i < 8; ++i)
      EXPECT_EQ(got[i], want[i - 2]) << c.name() << ": element " << i;
  }
}

TEST(ScanInterpEdges, I32SumsWrap) {
  const ScanCase c{DType::i32, {4}, 0, ReduceOp::Sum};
  const std::vector<double> got = run_case(c, {2147483647.0, 1, 1, -3});
  EXPECT_EQ(got[0], 2147483647.0);
  EXPECT_EQ(got[1], -2147483648.0) << "INT_MAX + 1 wraps";
  EXPECT_EQ(got[2], -2147483647.0);
  EXPECT_EQ(got[3], 2147483646.0) << "and wraps back";
}

// A cumsum along a row of any length, 16 columns at a time: each chunk's scan plus the total so far
// (carried).
TEST(ScanInterpEdges, ChunkedCumsumCarriedByALoop) {
  KernelBuilder kb("chunked_cumsum");
  Value x = kb.arg_ptr("x", f32), y = kb.arg_ptr("y", f32), n = kb.arg("n", i32);
  Value carry = scalar(0, f32);
  for_range(0, n, 16, [&](Value start) {
    Value offs = start + arange(0, 16);
    Value mask = offs < n;
    Value v = load(x + offs, mask, 0.0f);
    store(y + offs, cumsum(v, 0) + carry, mask);
    carry = carry + sum(v, 0);
  });
  Kernel k = kb.finish();
  const int64_t N = 45;
  HostBuffer hx(f32, N, "x"), hy(f32, N, "y");
  for (int64_t i = 0; i < N; ++i)
    hx.set(i, static_cast<double>(i % 7) - 3);
  interpret(k, {1, 1, 1}, {InterpArg::ptr(hx), InterpArg::ptr(hy), InterpArg::of_int(N)});
  double acc = 0;
  for (int64_t i = 0; i < N; ++i) {
    acc += hx.get(i);
    EXPECT_EQ(hy.get(i), acc) << "element " << i;
  }
}

} // namespace
