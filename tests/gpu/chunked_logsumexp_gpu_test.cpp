// The streaming kernel of the layout tests (tests/chunked_logsumexp_kernel.h: no conversions, 16-byte block
// loads) on the GPU against the double reference and the interpreter, on shapes its tiles do not divide and
// on a row stride that is not a multiple of 16 bytes (the block loads' element-by-element fallback).
#include "chunked_logsumexp_kernel.h"

#include "gpu/gpu_skip.h"
#include "jit/jit_kernel.h"
#include "kernels/compare.h"

#include <gtest/gtest.h>

using namespace kiln;
using kiln_test::ChunkedLogsumexp;

namespace {

class GpuChunkedLogsumexp : public ::testing::TestWithParam<ChunkedLogsumexp> {};

TEST_P(GpuChunkedLogsumexp, MatchesTheReferenceAndTheInterpreter) {
  KILN_REQUIRE_GPU();
  const ChunkedLogsumexp& c = GetParam();
  const Kernel k = kiln_test::chunked_logsumexp_kernel(c);
  std::shared_ptr<JitKernel> jit = JitKernel::compile(k);
  for (int64_t n_cols : {4 * c.chunk, 3 * c.chunk + 37, int64_t{1001}}) {
    SCOPED_TRACE("n_cols " + std::to_string(n_cols));
    const int64_t n_rows = 3 * c.rows + 1;
    HostBuffer x = kiln_test::chunked_logsumexp_input(c.dtype, n_rows, n_cols, 11);
    HostBuffer gpu(DType::f32, n_rows, "out"), interp(DType::f32, n_rows, "out");
    const Grid grid{(n_rows + c.rows - 1) / c.rows, 1, 1};
    interpret(
        k, grid,
        {InterpArg::ptr(x), InterpArg::ptr(interp), InterpArg::of_int(n_rows), InterpArg::of_int(n_cols)});
    run_on_gpu(
        *jit, grid,
        {InterpArg::ptr(x), InterpArg::ptr(gpu), InterpArg::of_int(n_rows), InterpArg::of_int(n_cols)});
    std::vector<double> g(static_cast<size_t>(n_rows)), i(static_cast<size_t>(n_rows));
    for (int64_t r = 0; r < n_rows; ++r)
      g[static_cast<size_t>(r)] = gpu.get(r), i[static_cast<size_t>(r)] = interp.get(r);
    const Comparison ref = compare_to_reference(g, kiln_test::chunked_logsumexp_reference(x, n_rows, n_cols));
    EXPECT_TRUE(ref.ok(1e-5)) << "against the reference: " << ref.str();
    const Comparison in = compare_to_reference(g, i);
    EXPECT_TRUE(in.ok(1e-5)) << "against the interpreter: " << in.str();
  }
}

INSTANTIATE_TEST_SUITE_P(cases, GpuChunkedLogsumexp,
                         ::testing::Values(ChunkedLogsumexp{DType::f16, 4, 256, 4},
                                           ChunkedLogsumexp{DType::bf16, 2, 512, 4},
                                           ChunkedLogsumexp{DType::f32, 4, 256, 8},
                                           ChunkedLogsumexp{DType::f16, 1, 1024, 4}),
                         [](const auto& info) { return kiln_test::label(info.param); });

} // namespace
