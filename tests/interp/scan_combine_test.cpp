// cumprod, prod and associative_scan in the interpreter at their edges (the shared cases of
// tests/scan_cases.h, cumprods and user combines among them, run in tests/interp/scan_test.cpp): i32 products
// that wrap, 0 * inf, prod along either axis with keepdims, a user combine that is not associative (run left
// to right: `a` the prefix, `b` the next element, reversed from the end), and a user combine's ops rounding
// to the dtype at each step where cumsum rounds each prefix once; and a combine built inside a loop body
// beside a carried value.
#include "dsl/dsl.h"
#include "dsl/interpreter.h"
#include "scan_cases.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <vector>

using namespace kiln;

namespace {

// y = f(x) over one 1-D tile of x's length, in the interpreter.
std::vector<double> run_1d(DType t, const std::vector<double>& xs, const std::function<Value(Value)>& f) {
  const int64_t n = static_cast<int64_t>(xs.size());
  KernelBuilder kb("one_tile");
  Value x = kb.arg_ptr("x", t), y = kb.arg_ptr("y", t);
  Value offs = arange(0, n);
  store(y + offs, f(load(x + offs)));
  const Kernel k = kb.finish();
  HostBuffer hx(t, n, "x"), hy(t, n, "y");
  for (int64_t i = 0; i < n; ++i)
    hx.set(i, xs[static_cast<size_t>(i)]);
  interpret(k, {1, 1, 1}, {InterpArg::ptr(hx), InterpArg::ptr(hy)});
  std::vector<double> out(xs.size());
  for (int64_t i = 0; i < n; ++i)
    out[static_cast<size_t>(i)] = hy.get(i);
  return out;
}

TEST(CumprodInterp, I32ProductsWrap) {
  const std::vector<double> got = run_1d(i32, {65536, 32768, 2, -1}, [](Value x) { return cumprod(x, 0); });
  EXPECT_EQ(got, (std::vector<double>{65536, -2147483648.0, 0, 0})) << "2^31 wraps to INT_MIN, 2^32 to 0";
}

TEST(CumprodInterp, ZeroTimesInfinityIsNaN) {
  const double inf = INFINITY;
  const std::vector<double> got = run_1d(f32, {2, inf, 0, 3}, [](Value x) { return cumprod(x, 0); });
  EXPECT_EQ(got[0], 2);
  EXPECT_EQ(got[1], inf);
  EXPECT_TRUE(std::isnan(got[2]) && std::isnan(got[3]));
}

TEST(CumprodInterp, ReverseMultipliesFromTheEnd) {
  const std::vector<double> got =
      run_1d(f32, {1, 2, 3, 4}, [](Value x) { return cumprod(x, 0, /*reverse=*/true); });
  EXPECT_EQ(got, (std::vector<double>{24, 24, 12, 4}));
}

TEST(ProdInterp, AlongEitherAxisWithKeepdims) {
  for (DType t : {f32, i32}) {
    for (int axis : {0, 1}) {
      KernelBuilder kb("prod");
      Value x = kb.arg_ptr("x", t), y = kb.arg_ptr("y", t);
      Value offs = arange(0, 4).expand_dims(1) * 8 + arange(0, 8).expand_dims(0); // (4, 8) row-major
      Value p = prod(load(x + offs), axis, /*keepdims=*/true);                    // (1, 8) or (4, 1)
      store(y + (axis == 0 ? arange(0, 8).expand_dims(0) : arange(0, 4).expand_dims(1)), p);
      const Kernel k = kb.finish();
      HostBuffer hx(t, 32, "x"), hy(t, 8, "y");
      for (int64_t i = 0; i < 32; ++i)
        hx.set(i, static_cast<double>(i % 3 == 0 ? -2 : 1 + i % 2)); // -2, 2, 1, -2, ...: exact products
      interpret(k, {1, 1, 1}, {InterpArg::ptr(hx), InterpArg::ptr(hy)});
      for (int64_t line = 0; line < (axis == 0 ? 8 : 4); ++line) {
        double want = 1;
        for (int64_t q = 0; q < (axis == 0 ? 4 : 8); ++q)
          want *= hx.get(axis == 0 ? q * 8 + line : line * 8 + q);
        EXPECT_EQ(hy.get(line), want) << dtype_name(t) << " axis " << axis << " line " << line;
      }
    }
  }
}

TEST(AssociativeScanInterp, ANonAssociativeCombineRunsLeftToRight) {
  auto minus = [](Value a, Value b) { return a - b; };
  EXPECT_EQ(run_1d(i32, {10, 1, 2, 3}, [&](Value x) { return associative_scan(x, 0, minus); }),
            (std::vector<double>{10, 9, 7, 4}))
      << "((10 - 1) - 2) - 3: a is the prefix, b the next element";
  EXPECT_EQ(run_1d(i32, {10, 1, 2, 3}, [&](Value x) { return associative_scan(x, 0, minus, true); }),
            (std::vector<double>{-10, 0, 1, 3}))
      << "reversed: from the last element, ((3 - 2) - 1) - 10";
}

TEST(AssociativeScanInterp, TheCombinesOpsRoundToTheDtypeAtEachStep) {
  // f16 holds even integers only from 2048 on: 2048 + 1 rounds back to 2048 at every step of a + b, while
  // cumsum rounds each exact prefix (2049, 2050, 2051) once.
  const std::vector<double> xs{2048, 1, 1, 1};
  EXPECT_EQ(
      run_1d(f16, xs, [](Value x) { return associative_scan(x, 0, [](Value a, Value b) { return a + b; }); }),
      (std::vector<double>{2048, 2048, 2048, 2048}));
  EXPECT_EQ(run_1d(f16, xs, [](Value x) { return cumsum(x, 0); }),
            (std::vector<double>{2048, 2048, 2050, 2052}));
}

TEST(AssociativeScanInterp, LiteralsCastsAndMathInsideTheCombine) {
  // The running maximum of |x| + 1 as f32 computed through f64: every op kind a combine may hold.
  auto combine = [](Value a, Value b) {
    Value wide = maximum(a.to(f64), abs(b).to(f64) + 1.0);
    return where(a > wide.to(f32), a, wide.to(f32));
  };
  EXPECT_EQ(run_1d(f32, {-3, 1, -7, 2}, [&](Value x) { return associative_scan(x, 0, combine); }),
            (std::vector<double>{-3, 2, 8, 8}));
}

TEST(AssociativeScanInterp, ACombineInsideALoopBesideACarriedValue) {
  const Kernel k = kiln_test::chunked_running_max_kernel();
  const int64_t R = 2, N = 45;
  HostBuffer x(i32, R * N, "x"), y(i32, R * N, "y");
  for (int64_t i = 0; i < R * N; ++i)
    x.set(i, static_cast<double>((i * 37) % 101) - 50);
  interpret(k, {R, 1, 1}, {InterpArg::ptr(x), InterpArg::ptr(y), InterpArg::of_int(N)});
  for (int64_t r = 0; r < R; ++r) {
    double best = -2147483648.0;
    for (int64_t i = r * N; i < (r + 1) * N; ++i) {
      best = std::max(best, x.get(i));
      EXPECT_EQ(y.get(i), best) << "element " << i;
    }
  }
}

} // namespace
