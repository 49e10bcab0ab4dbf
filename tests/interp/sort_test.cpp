// sort in the interpreter over the shared cases of tests/sort_cases.h (1-D and 2-D tiles, either axis, every
// dtype family, ascending and descending) against a plain C++ sort by the key (NaN, value, +0 after -0): NaN
// last ascending and first descending, -0 before +0, infinities at the ends of the numbers.
#include "dsl/dsl.h"
#include "dsl/interpreter.h"
#include "sort_cases.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

using namespace kiln;
using kiln_test::SortCase;

namespace {

class SortInterp : public ::testing::TestWithParam<SortCase> {};

TEST_P(SortInterp, MatchesTheReference) {
  const SortCase& c = GetParam();
  const Kernel k = kiln_test::sort_kernel(c);
  const std::vector<double> xs = kiln_test::sort_inputs(c, 41);
  HostBuffer x(c.dtype, c.numel(), "x"), y(c.dtype, c.numel(), "y");
  for (int64_t i = 0; i < c.numel(); ++i)
    x.set(i, xs[static_cast<size_t>(i)]);
  interpret(k, {1, 1, 1}, {InterpArg::ptr(x), InterpArg::ptr(y)});
  const std::vector<double> want = kiln_test::sort_reference(c, xs);
  for (int64_t i = 0; i < c.numel(); ++i)
    ASSERT_TRUE(kiln_test::same_sorted_element(y.get(i), want[static_cast<size_t>(i)]))
        << c.name() << ": element " << i << " is " << y.get(i) << ", want " << want[static_cast<size_t>(i)];
}

INSTANTIATE_TEST_SUITE_P(cases, SortInterp, ::testing::ValuesIn(kiln_test::sort_cases()),
                         [](const auto& info) { return info.param.name(); });

TEST(SortInterpEdges, TheTotalOrderOfFloats) {
  KernelBuilder kb("sort8");
  Value x = kb.arg_ptr("x", f32), y = kb.arg_ptr("y", f32), z = kb.arg_ptr("z", f32);
  Value v = load(x + arange(0, 8));
  store(y + arange(0, 8), sort(v, 0));
  store(z + arange(0, 8), sort(v, -1, /*descending=*/true));
  const Kernel k = kb.finish();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const std::vector<double> in{0.0, nan, -INFINITY, 1.5, -0.0, INFINITY, -2, 0.0};
  HostBuffer hx(f32, 8, "x"), hy(f32, 8, "y"), hz(f32, 8, "z");
  for (int64_t i = 0; i < 8; ++i)
    hx.set(i, in[static_cast<size_t>(i)]);
  interpret(k, {1, 1, 1}, {InterpArg::ptr(hx), InterpArg::ptr(hy), InterpArg::ptr(hz)});
  const std::vector<double> up{-INFINITY, -2, -0.0, 0.0, 0.0, 1.5, INFINITY, nan};
  for (int64_t i = 0; i < 8; ++i) {
    EXPECT_TRUE(kiln_test::same_sorted_element(hy.get(i), up[static_cast<size_t>(i)])) << "ascending " << i;
    EXPECT_TRUE(kiln_test::same_sorted_element(hz.get(i), up[static_cast<size_t>(7 - i)]))
        << "descending " << i;
  }
}

} // namespace
