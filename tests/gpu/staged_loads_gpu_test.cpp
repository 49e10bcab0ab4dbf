// A streaming loop's register loads staged through a shared ring (tests/chunked_row_dot_kernel.h; the plan is
// checked in tests/codegen/staged_loads_codegen_test.cpp) on the GPU, against the double reference and the
// interpreter: 1 to 4 stages, loops of one iteration and of a ragged last tile, a row count the tiles do not
// divide, a row stride that is not a multiple of 16 bytes (cp.async's element-by-element path) and a
// column-major second operand.
#include "chunked_row_dot_kernel.h"

#include "gpu/gpu_skip.h"
#include "jit/jit_kernel.h"
#include "kernels/compare.h"

#include <gtest/gtest.h>

using namespace kiln;
using kiln_test::ChunkedRowDot;

namespace {

class GpuStagedLoads : public ::testing::TestWithParam<ChunkedRowDot> {};

TEST_P(GpuStagedLoads, MatchTheReferenceAndTheInterpreter) {
  KILN_REQUIRE_GPU();
  const ChunkedRowDot& c = GetParam();
  const Kernel k = kiln_test::chunked_row_dot_kernel(c);
  std::shared_ptr<JitKernel> jit = JitKernel::compile(k);
  for (int64_t n_rows : {3 * c.rows + 1, int64_t{64}})
    for (int64_t n_cols : {c.chunk, 4 * c.chunk, 3 * c.chunk + 37, int64_t{1001}}) {
      SCOPED_TRACE("n_rows " + std::to_string(n_rows) + " n_cols " + std::to_string(n_cols));
      HostBuffer x = kiln_test::chunked_row_dot_input(c.dtype, n_rows, n_cols, 5, "x");
      HostBuffer y = kiln_test::chunked_row_dot_input(c.dtype, n_rows, n_cols, 6, "y");
      HostBuffer gpu(DType::f32, n_rows, "out"), interp(DType::f32, n_rows, "out");
      for (int64_t i = 0; i < n_rows; ++i)
        gpu.set(i, std::nan("")); // poisoned: every row must be written
      const Grid grid{(n_rows + c.rows - 1) / c.rows, 1, 1};
      auto args = [&](HostBuffer& out) {
        return std::vector<InterpArg>{InterpArg::ptr(x), InterpArg::ptr(y), InterpArg::ptr(out),
                                      InterpArg::of_int(n_rows), InterpArg::of_int(n_cols)};
      };
      interpret(k, grid, args(interp));
      run_on_gpu(*jit, grid, args(gpu));
      std::vector<double> g(static_cast<size_t>(n_rows)), i(static_cast<size_t>(n_rows));
      for (int64_t r = 0; r < n_rows; ++r)
        g[static_cast<size_t>(r)] = gpu.get(r), i[static_cast<size_t>(r)] = interp.get(r);
      const Comparison ref = compare_to_reference(
          g, kiln_test::chunked_row_dot_reference(x, y, n_rows, n_cols, c.y_column_major));
      EXPECT_TRUE(ref.ok(1e-5)) << "against the reference: " << ref.str();
      const Comparison in = compare_to_reference(g, i);
      EXPECT_TRUE(in.ok(1e-5)) << "against the interpreter: " << in.str();
    }
}

INSTANTIATE_TEST_SUITE_P(cases, GpuStagedLoads,
                         ::testing::ValuesIn(kiln_test::chunked_row_dot_cases()),
                         [](const auto& info) { return kiln_test::label(info.param); });

} // namespace
