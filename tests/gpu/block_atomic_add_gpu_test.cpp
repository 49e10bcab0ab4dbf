// tests/block_atomic_add_kernel.h on the GPU: atomic_add through a block pointer matches the double reference
// for blocks inside the tensor, across its edges (rows below 0 and past R, columns past C at a multiple of 4 and
// not), misaligned (an odd column offset), strided (stride 2 along the row), with rows back to back in the tensor
// (one bulk reduction for a block inside, one a row for one cut) and of f16, with programs that add to the same
// block. On sm_90a the f32 cases go through the bulk-reduction stage (plan_bulk_reductions), whose rows fall back
// to element adds where the launch cannot reduce them in bulk; elsewhere they add element by element. With the TMA
// unit off, sm_90a adds f32 from registers by vector reductions, with an element path for the pieces that are
// misaligned, strided or cut by the edge.
#include "block_atomic_add_kernel.h"

#include "gpu/gpu_skip.h"
#include "jit/jit_kernel.h"
#include "kernels/compare.h"
#include "runtime/device.h"
#include "unit/interpreter_test_support.h"

#include <gtest/gtest.h>

using namespace kiln;
using kiln::testing_support::random_floats;

namespace {

struct BlockAddCase {
  const char* what;
  DType dt;
  int64_t R, C, stride_r, stride_c, row_off, col_off, shift;
};

TEST(GpuBlockAtomicAdd, MatchesTheReferenceInsideAcrossEdgesMisalignedAndStrided) {
  KILN_REQUIRE_GPU();
  const int64_t P = 6, BR = 64, BC = 32;
  const bool hopper = rt::current_device().cc_major >= 9;
  const BlockAddCase cases[] = {
      {"inside, rows past R", DType::f32, 100, 70, 72, 1, 0, 0, 64},
      {"rows below 0", DType::f32, 100, 70, 72, 1, -10, 8, 40},
      {"columns cut at 28 (a multiple of 4)", DType::f32, 90, 68, 72, 1, 5, 40, 30},
      {"columns cut at 22", DType::f32, 90, 70, 72, 1, 5, 48, 30},
      {"misaligned", DType::f32, 90, 70, 72, 1, 3, 1, 20},
      {"strided rows", DType::f32, 80, 40, 96, 2, 0, 4, 16},
      {"f16", DType::f16, 100, 70, 72, 1, -3, 4, 64},
      {"rows back to back, inside", DType::f32, 200, 32, 32, 1, 8, 0, 64},
      {"rows back to back, past R", DType::f32, 100, 32, 32, 1, 0, 0, 64},
  };
  CodegenOptions no_tma; // sm_90a: f32 from registers by vector reductions, each piece checked at run time
  no_tma.tma = false;
  for (const BlockAddCase& c : cases) {
    for (const bool staged : {true, false}) {
      if (!staged && (!hopper || c.dt != DType::f32))
        continue;
      SCOPED_TRACE(std::string(c.what) + (staged ? "" : ", TMA off"));
      const Kernel k = kiln_test::block_atomic_add_kernel(BR, BC, c.dt, 4);
      std::shared_ptr<JitKernel> jit = JitKernel::compile(k, {}, staged ? CodegenOptions{} : no_tma);
      if (hopper) {
        EXPECT_EQ(jit->generated().lowered.find("through the stage") != std::string::npos,
                  staged && c.dt == DType::f32)
            << jit->generated().lowered;
        if (!staged) {
          EXPECT_NE(jit->generated().source.find("kiln::red_add_v"), std::string::npos);
        }
      }
      HostBuffer x = random_floats(c.dt, P * BR * BC, "x", 11, -1, 1);
      HostBuffer y = random_floats(c.dt, c.R * c.stride_r, "y", 12, -1, 1);
      const std::vector<double> want = kiln_test::block_atomic_add_reference(x, y, P, BR, BC, c.R, c.C, c.stride_r,
                                                                             c.stride_c, c.row_off, c.col_off, c.shift);
      run_on_gpu(*jit, Grid{P, 1, 1},
                 {InterpArg::ptr(x), InterpArg::ptr(y), InterpArg::of_int(c.R), InterpArg::of_int(c.C),
                  InterpArg::of_int(c.stride_r), InterpArg::of_int(c.stride_c), InterpArg::of_int(c.row_off),
                  InterpArg::of_int(c.col_off), InterpArg::of_int(c.shift)});
      std::vector<double> got(static_cast<size_t>(y.numel()));
      for (int64_t e = 0; e < y.numel(); ++e)
        got[static_cast<size_t>(e)] = y.get(e);
      // f32: a few terms summed in some order; f16: each add rounded to f16.
      const Comparison cmp = compare_to_reference(got, want);
      EXPECT_TRUE(cmp.ok(c.dt == DType::f32 ? 1e-5 : 4e-3)) << cmp.str();
    }
  }
}

} // namespace
