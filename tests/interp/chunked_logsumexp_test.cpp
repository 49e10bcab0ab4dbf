// The streaming kernel of the layout tests (tests/chunked_logsumexp_kernel.h) in the interpreter against the
// double reference, on row and column counts its tiles do not divide, so that the -inf padding of the ragged
// tiles is exercised; its GPU twin holds the generated code to the same.
#include "chunked_logsumexp_kernel.h"

#include "kernels/compare.h"

#include <gtest/gtest.h>

using namespace kiln;
using kiln_test::ChunkedLogsumexp;

namespace {

class ChunkedLogsumexpInterp : public ::testing::TestWithParam<ChunkedLogsumexp> {};

TEST_P(ChunkedLogsumexpInterp, MatchesTheReference) {
  const ChunkedLogsumexp& c = GetParam();
  const int64_t n_rows = 2 * c.rows + 1, n_cols = 2 * c.chunk + 37;
  HostBuffer x = kiln_test::chunked_logsumexp_input(c.dtype, n_rows, n_cols, 7);
  HostBuffer out(DType::f32, n_rows, "out");
  interpret(kiln_test::chunked_logsumexp_kernel(c), Grid{(n_rows + c.rows - 1) / c.rows, 1, 1},
            {InterpArg::ptr(x), InterpArg::ptr(out), InterpArg::of_int(n_rows), InterpArg::of_int(n_cols)});
  std::vector<double> got(static_cast<size_t>(n_rows));
  for (int64_t r = 0; r < n_rows; ++r)
    got[static_cast<size_t>(r)] = out.get(r);
  const Comparison cmp = compare_to_reference(got, kiln_test::chunked_logsumexp_reference(x, n_rows, n_cols));
  EXPECT_TRUE(cmp.ok(1e-5)) << cmp.str();
}

INSTANTIATE_TEST_SUITE_P(cases, ChunkedLogsumexpInterp,
                         ::testing::Values(ChunkedLogsumexp{DType::f16, 4, 64, 4},
                                           ChunkedLogsumexp{DType::bf16, 2, 128, 4},
                                           ChunkedLogsumexp{DType::f32, 4, 32, 8}),
                         [](const auto& info) { return kiln_test::label(info.param); });

} // namespace
