// Cross-warp reductions that skip their leading barrier (two scratch slots taken in turn; the plan is checked
// in tests/codegen/reduction_slots_test.cpp) on the GPU: tests/reduction_chain_kernel.h's eight per-row results
// against a double-precision reference and the interpreter, with the loop storing each pair of rows (a barrier
// at the loop's top) and keeping its results in registers (none), both branches of its if, and row counts with
// a half pair at the end. A reduction that wrote its slot while a slower warp still read it would show here
// as a wrong sum, max or argmax (and in racecheck).
#include "reduction_chain_kernel.h"

#include "dsl/interpreter.h"
#include "gpu/gpu_skip.h"
#include "jit/jit_kernel.h"
#include "kernels/compare.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>

using namespace kiln;

namespace {

// out[r, 0..6] of reduction_chain_kernel, in double, for row r of x (1024 values).
std::vector<double> row_results(const HostBuffer& x, int64_t r, bool flip) {
  double s = 0, mn = INFINITY, sq = 0;
  int64_t am = 0;
  for (int64_t c = 0; c < 1024; ++c) {
    const double v = x.get(r * 1024 + c);
    s += v, sq += v * v, mn = std::min(mn, v);
    if (v > x.get(r * 1024 + am))
      am = c;
  }
  const double mean = s / 1024;
  double mx = -INFINITY, ss = 0, abs_sum = 0, abs_max = 0;
  for (int64_t c = 0; c < 1024; ++c) {
    const double d = x.get(r * 1024 + c) - mean;
    mx = std::max(mx, d), ss += d * d, abs_sum += std::abs(d), abs_max = std::max(abs_max, std::abs(d));
  }
  return {s, mx, ss, mn, flip ? abs_sum : abs_max, static_cast<double>(am), sq};
}

TEST(GpuReductionSlots, ChainedReductionsMatchTheReferenceAndTheInterpreter) {
  KILN_REQUIRE_GPU();
  for (bool stores_in_loop : {true, false}) {
    const Kernel k = kiln_test::reduction_chain_kernel(stores_in_loop);
    std::shared_ptr<JitKernel> jit = JitKernel::compile(k);
    for (int64_t n_rows : {2, 37, 256})
      for (bool flip : {false, true}) {
        SCOPED_TRACE(fmt::format("stores in loop {} n_rows {} flip {}", stores_in_loop, n_rows, flip));
        std::mt19937_64 rng(static_cast<uint64_t>(n_rows * 2 + flip));
        std::uniform_real_distribution<double> dist(-1.0, 1.0);
        HostBuffer x(DType::f32, n_rows * 1024, "x");
        for (int64_t i = 0; i < x.numel(); ++i)
          x.set(i, dist(rng));
        HostBuffer gpu(DType::f32, n_rows * 8, "out"), interp(DType::f32, n_rows * 8, "out");
        for (int64_t i = 0; i < gpu.numel(); ++i)
          gpu.set(i, std::nan("")), interp.set(i, std::nan("")); // poisoned
        auto args = [&](HostBuffer& out) {
          return std::vector<InterpArg>{InterpArg::ptr(x), InterpArg::ptr(out), InterpArg::of_int(n_rows),
                                        InterpArg::of_int(flip ? 1 : 0)};
        };
        interpret(k, Grid{1, 1, 1}, args(interp));
        run_on_gpu(*jit, Grid{1, 1, 1}, args(gpu));
        std::vector<double> ref, g, i;
        if (stores_in_loop) {
          for (int64_t r = 0; r < n_rows; ++r) {
            std::vector<double> want = row_results(x, r, flip);
            want.push_back(1.0);
            for (int64_t c = 0; c < 8; ++c) {
              ref.push_back(want[static_cast<size_t>(c)]);
              g.push_back(gpu.get(r * 8 + c)), i.push_back(interp.get(r * 8 + c));
              if (c == 5) { // the argmax: exactly the reference's column
                EXPECT_EQ(gpu.get(r * 8 + c), want[5]) << "row " << r;
              }
            }
          }
        } else {
          double total = 0;
          for (int64_t r = 0; r < n_rows; ++r) {
            const std::vector<double> want = row_results(x, r, flip);
            for (size_t c = 0; c < 6; ++c)
              total += want[c];
          }
          ref = {total};
          g = {gpu.get(0)}, i = {interp.get(0)};
          for (int64_t c = 1; c < 8; ++c)
            EXPECT_EQ(gpu.get(c), 0.0) << "out[" << c << "]";
        }
        const Comparison against_ref = compare_to_reference(g, ref);
        EXPECT_TRUE(against_ref.ok(1e-5)) << against_ref.str();
        const Comparison against_interp = compare_to_reference(g, i);
        EXPECT_TRUE(against_interp.ok(1e-5)) << against_interp.str();
      }
  }
}

} // namespace
