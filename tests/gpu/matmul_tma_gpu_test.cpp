// matmul on the TMA path (codegen/plan_tma_copies.h, jit/tensor_map_args.h): on sm_90a the pipelined A and
// B tiles are copied by TMA onto mbarriers whenever the launch's tensor maps are legal. Shapes whose edges
// cut tiles in M, N and K (TMA's zero fill replaces the bounds checks), both operand orders, f16 and bf16,
// several tile shapes and ring depths; each case first checks that this launch does take the TMA path,
// then holds C to the double-precision reference. (GpuMatmul's odd-K cases cover the launches whose maps are
// illegal and fall back to cp.async inside the same kernel; GpuMatmulWarpSpecialized's, a warp-specialised
// kernel's, which run the config generated without warp specialisation.) Skipped below compute capability 9.0.
#include "gpu/gpu_skip.h"
#include "jit/jit_kernel.h"
#include "jit/tensor_map_args.h"
#include "kernels/compare.h"
#include "kernels/matmul/matmul.h"
#include "runtime/device.h"

#include <gtest/gtest.h>

#include <ostream>
#include <string>

using namespace kiln;

namespace {

struct TmaMatmulCase {
  int64_t M, N, K;
  DType dtype;
  bool a_col, b_col;
  int64_t bm, bn, bk;
  int warps, stages;
  bool ws = false;         // WARP_SPECIALIZE=1: a producer warpgroup issues the copies
  int persistent = 0;      // PERSISTENT=1: one wave of CTAs walks the tiles; 2: each draws its next from a counter
};

std::string label(const TmaMatmulCase& c) {
  return "M" + std::to_string(c.M) + "_N" + std::to_string(c.N) + "_K" + std::to_string(c.K) + "_" +
         std::string(dtype_name(c.dtype)) + (c.a_col ? "_Acol" : "") + (c.b_col ? "_Bcol" : "") + "_bm" +
         std::to_string(c.bm) + "_bn" + std::to_string(c.bn) + "_bk" + std::to_string(c.bk) + "_s" +
         std::to_string(c.stages) + (c.ws ? "_ws" : "") + (c.persistent == 1 ? "_persistent" : c.persistent == 2 ? "_dynamic" : "");
}
// ctest lists the cases by this, not by a dump of the struct's bytes.
void PrintTo(const TmaMatmulCase& c, std::ostream* os) { *os << label(c); }

class GpuMatmulTma : public ::testing::TestWithParam<TmaMatmulCase> {};

TEST_P(GpuMatmulTma, TakesTheTmaPathAndMatchesReference) {
  KILN_REQUIRE_GPU();
  KILN_REQUIRE_SM90("TMA");
  const TmaMatmulCase& tc = GetParam();
  MatmulProblem p{tc.M, tc.N, tc.K, tc.dtype, false, tc.a_col, tc.b_col};
  Config c = default_matmul_config(p);
  c.set("BLOCK_M", tc.bm).set("BLOCK_N", tc.bn).set("BLOCK_K", tc.bk);
  c.num_warps = tc.warps;
  c.num_stages = tc.stages;
  if (tc.bm * tc.bn > 128 * 128 || tc.ws)
    c.set("MIN_BLOCKS_PER_SM", 1); // a 128 x 256 accumulator needs more than two CTAs' registers allow
  c.set("WARP_SPECIALIZE", tc.ws ? 1 : 0);
  c.set("PERSISTENT", tc.persistent);

  // The plan copies both tiles by TMA, and this launch's maps (buffers from cuMemAlloc, packed strides) are
  // legal, so the kernel takes that path rather than its cp.async fallback.
  const Kernel k = build_matmul(c);
  std::shared_ptr<JitKernel> jk = JitKernel::compile(k);
  // A and B; warp-specialised, C's store by TMA where its stage fits (codegen/plan_tma_stores.h).
  EXPECT_TRUE(jk->generated().tma_store_maps == 0 || (tc.ws && jk->generated().tma_store_maps == 1))
      << jk->generated().lowered;
  ASSERT_EQ(jk->generated().tensor_maps.size(), 2u + static_cast<size_t>(jk->generated().tma_store_maps))
      << jk->generated().lowered;
  EXPECT_EQ(jk->generated().threads, 32 * tc.warps + (tc.ws ? 128 : 0)) << jk->generated().why_not_warp_specialized;
  EXPECT_EQ(jk->generated().persistent_ctas_per_sm > 0, tc.persistent != 0) << jk->generated().why_not_persistent;
  EXPECT_EQ(jk->generated().persistent_dynamic, tc.persistent == 2);
  rt::DeviceBuffer a(static_cast<size_t>(tc.M * tc.K * 2)), b(static_cast<size_t>(tc.K * tc.N * 2));
  const int64_t sam = tc.a_col ? 1 : tc.K, sak = tc.a_col ? tc.M : 1;
  const int64_t sbk = tc.b_col ? 1 : tc.N, sbn = tc.b_col ? tc.K : 1;
  std::vector<LaunchArg> args = {LaunchArg::pointer(a),     LaunchArg::pointer(b),     LaunchArg::pointer(a),
                                 LaunchArg::of_int(tc.M),   LaunchArg::of_int(tc.N),   LaunchArg::of_int(tc.K),
                                 LaunchArg::of_int(sam),    LaunchArg::of_int(sak),    LaunchArg::of_int(sbk),
                                 LaunchArg::of_int(sbn),    LaunchArg::of_int(tc.N),   LaunchArg::of_int(1)};
  TensorMapArgs maps = tensor_map_args(jk->generated().tensor_maps, k.params, args);
  ASSERT_EQ(maps.use_tma, 1) << maps.why_not;

  MatmulInputs in = make_matmul_inputs(p, 77 + tc.M + tc.N + tc.K, 1.0);
  std::vector<double> out = run_matmul_interpreted(p, c, in, Executor::Gpu);
  Comparison cmp = compare_to_reference(out, matmul_reference(p, in));
  EXPECT_TRUE(cmp.ok(tolerance(tc.dtype))) << cmp.str() << " config " << c.str();
}

INSTANTIATE_TEST_SUITE_P(
    matmul, GpuMatmulTma,
    ::testing::Values(TmaMatmulCase{512, 512, 512, f16, false, false, 128, 128, 32, 8, 3},
                      TmaMatmulCase{520, 392, 328, f16, false, false, 128, 128, 64, 4, 4},
                      TmaMatmulCase{264, 136, 72, bf16, false, false, 64, 64, 32, 4, 3},
                      TmaMatmulCase{384, 256, 200, f16, true, false, 128, 128, 32, 8, 3},
                      TmaMatmulCase{256, 392, 136, bf16, false, true, 128, 64, 64, 4, 3},
                      TmaMatmulCase{136, 264, 520, f16, true, true, 64, 128, 32, 4, 4},
                      TmaMatmulCase{1000, 1000, 1000, f16, false, false, 128, 256, 64, 8, 3},
                      TmaMatmulCase{8, 16, 2048, bf16, false, false, 64, 64, 64, 4, 5},
                      // Warp-specialised: the producer fills every slot; edges in M, N and K; a one-step loop;
                      // one and two consumer warpgroups; a product left in flight across the ring.
                      TmaMatmulCase{1000, 1000, 1000, f16, false, false, 128, 256, 64, 8, 4, true},
                      TmaMatmulCase{520, 392, 328, bf16, false, false, 128, 128, 64, 8, 3, true},
                      TmaMatmulCase{384, 256, 200, f16, true, true, 128, 128, 64, 4, 5, true},
                      TmaMatmulCase{136, 264, 40, f16, false, true, 128, 128, 64, 8, 2, true},
                      TmaMatmulCase{8, 16, 2048, bf16, false, false, 64, 64, 64, 4, 4, true},
                      // Persistent: more tiles than a wave (each CTA walks several, the producer filling the next
                      // tile's ring under the epilogue), fewer, and without a producer (every thread copies).
                      TmaMatmulCase{2048, 2056, 264, f16, false, false, 128, 128, 64, 8, 4, true, 1},
                      TmaMatmulCase{1000, 1000, 1000, bf16, false, false, 128, 256, 64, 8, 4, true, 1},
                      TmaMatmulCase{2056, 2048, 136, bf16, true, false, 128, 128, 32, 8, 3, false, 1},
                      // Dynamic (PERSISTENT=2): each CTA draws its next tile from the launch's counter; with a
                      // producer (which draws and hands the ids to the consumers) and without (thread 0 draws).
                      TmaMatmulCase{2048, 2056, 264, f16, false, false, 128, 128, 64, 8, 4, true, 2},
                      TmaMatmulCase{1000, 1000, 1000, bf16, false, false, 128, 256, 64, 8, 4, true, 2},
                      TmaMatmulCase{2056, 2048, 136, bf16, true, false, 128, 128, 32, 8, 3, false, 2}),
    [](const auto& info) { return label(info.param); });

} // namespace

namespace {

// A warp-specialised matmul whose tensor maps are illegal (K odd: A's row stride is not a multiple of 16 bytes)
// runs its config generated without warp specialisation (GeneratedKernel::illegal_maps_fallback), whose threads
// all copy by cp.async (bf16 on a persistent grid, static and dynamic, which the fallback keeps).
TEST(GpuMatmulWarpSpecialized, IllegalMapsRunTheUnspecialisedKernel) {
  KILN_REQUIRE_GPU();
  KILN_REQUIRE_SM90("warp specialisation");
  for (auto [dt, persistent] : {std::pair{f16, 0}, std::pair{bf16, 1}, std::pair{bf16, 2}}) {
    // bf16: 15 x 12 tiles, more than one wave of 132 SMs.
    MatmulProblem p = dt == f16 ? MatmulProblem{333, 270, 301, dt, false, false, false}
                                : MatmulProblem{1800, 1500, 101, dt, false, false, false};
    Config c = default_matmul_config(p);
    c.set("BLOCK_M", 128).set("BLOCK_N", 128).set("BLOCK_K", 64).set("MIN_BLOCKS_PER_SM", 1);
    c.set("WARP_SPECIALIZE", 1).set("PERSISTENT", persistent);
    c.num_warps = 8;
    c.num_stages = 4;
    std::shared_ptr<JitKernel> jk = JitKernel::compile(build_matmul(c));
    ASSERT_EQ(jk->generated().threads, 384) << jk->generated().why_not_warp_specialized;
    ASSERT_TRUE(jk->generated().illegal_maps_fallback);
    EXPECT_EQ(jk->generated().illegal_maps_fallback->threads, 256);
    MatmulInputs in = make_matmul_inputs(p, 5, 1.0);
    std::vector<double> out = run_matmul_interpreted(p, c, in, Executor::Gpu);
    Comparison cmp = compare_to_reference(out, matmul_reference(p, in));
    EXPECT_TRUE(cmp.ok(tolerance(dt))) << cmp.str() << " config " << c.str();
  }
}

} // namespace

namespace {

// A dynamic persistent grid (PERSISTENT=2) draws every program from one counter along x: a launch over a grid
// with more than one row of CTAs is an error naming the grid, not a launch whose rows would share the counter.
TEST(GpuPersistentGrid, ADynamicGridOverTwoDimensionsIsAnError) {
  KILN_REQUIRE_GPU();
  MatmulProblem p{256, 256, 64, f16, false, false, false};
  Config c = default_matmul_config(p);
  c.set("PERSISTENT", 2);
  std::shared_ptr<JitKernel> jk = JitKernel::compile(build_matmul(c));
  ASSERT_TRUE(jk->generated().persistent_dynamic) << jk->generated().why_not_persistent;
  rt::DeviceBuffer a(256 * 64 * 2), b(64 * 256 * 2), out(256 * 256 * 2);
  const std::vector<LaunchArg> args = {LaunchArg::pointer(a),   LaunchArg::pointer(b),   LaunchArg::pointer(out),
                                       LaunchArg::of_int(256),  LaunchArg::of_int(256),  LaunchArg::of_int(64),
                                       LaunchArg::of_int(64),   LaunchArg::of_int(1),    LaunchArg::of_int(256),
                                       LaunchArg::of_int(1),    LaunchArg::of_int(256),  LaunchArg::of_int(1)};
  try {
    jk->launch(Grid{4, 2, 1}, args);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("walks program ids along x only; got grid (4, 2, 1)"), std::string::npos)
        << e.what();
  }
}

} // namespace
