// tests/head_group_kernel.h on the GPU: a loop over a group's heads whose pipelined tiles are copied by TMA
// through a map capped by a parameter (min(head0 + g, H): the head dim is H + 1 long at launch) matches the
// double reference and the interpreter, for groups of 1 to 4 heads and row counts the tiles do not divide. On
// sm_90a the test first checks that the launch takes the TMA path; elsewhere it runs the cp.async kernel.
#include "head_group_kernel.h"

#include "gpu/gpu_skip.h"
#include "jit/jit_kernel.h"
#include "jit/tensor_map_args.h"
#include "kernels/compare.h"
#include "runtime/device.h"
#include "unit/interpreter_test_support.h"

#include <gtest/gtest.h>

using namespace kiln;
using kiln::testing_support::poisoned;
using kiln::testing_support::random_floats;

namespace {

TEST(GpuHeadGroupCap, TmaThroughAParameterCappedMapMatchesTheReferenceAndTheInterpreter) {
  KILN_REQUIRE_GPU();
  const Kernel k = kiln_test::head_group_kernel(/*capped=*/true);
  std::shared_ptr<JitKernel> jit = JitKernel::compile(k);
  const bool hopper = rt::current_device().cc_major >= 9;
  for (int64_t group : {1, 2, 4})
    for (int64_t n : {64, 200}) {
      const int64_t H = 8;
      SCOPED_TRACE("group " + std::to_string(group) + " n " + std::to_string(n));
      HostBuffer x = random_floats(DType::f16, H * n * 64, "x", static_cast<unsigned>(7 + group + n), -1, 1);
      HostBuffer w = random_floats(DType::f16, 64 * 64, "w", 3, -1, 1);
      const int64_t outs = H / group * 64 * 64;
      HostBuffer gpu = poisoned(DType::f32, outs, "out"); // every element must be written
      HostBuffer interp(DType::f32, outs, "out");
      auto args = [&](HostBuffer& out) {
        return std::vector<InterpArg>{InterpArg::ptr(x),      InterpArg::ptr(w),          InterpArg::ptr(out),
                                      InterpArg::of_int(H),   InterpArg::of_int(group),   InterpArg::of_int(n),
                                      InterpArg::of_int(n * 64)};
      };
      if (hopper) {
        ASSERT_EQ(jit->generated().tensor_maps.size(), 1u) << jit->generated().lowered;
        const std::vector<LaunchArg> launch = {LaunchArg::pointer(0x7f0000000000), LaunchArg::pointer(0x7f0000100000),
                                               LaunchArg::pointer(0x7f0000200000), LaunchArg::of_int(H),
                                               LaunchArg::of_int(group),           LaunchArg::of_int(n),
                                               LaunchArg::of_int(n * 64)};
        const TensorMapArgs maps = tensor_map_args(jit->generated().tensor_maps, k.params, launch);
        EXPECT_EQ(maps.use_tma, 1) << maps.why_not;
      }
      const Grid grid{H / group, 1, 1};
      interpret(k, grid, args(interp));
      run_on_gpu(*jit, grid, args(gpu));
      std::vector<double> g(static_cast<size_t>(outs)), i(static_cast<size_t>(outs));
      for (int64_t e = 0; e < outs; ++e)
        g[static_cast<size_t>(e)] = gpu.get(e), i[static_cast<size_t>(e)] = interp.get(e);
      const Comparison ref = compare_to_reference(g, kiln_test::head_group_reference(x, w, H, group, n));
      EXPECT_TRUE(ref.ok(1e-4)) << "against the reference: " << ref.str();
      const Comparison in = compare_to_reference(g, i);
      EXPECT_TRUE(in.ok(1e-4)) << "against the interpreter: " << in.str();
    }
}

} // namespace
