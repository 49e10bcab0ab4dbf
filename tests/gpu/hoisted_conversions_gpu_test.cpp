// A conversion hoisted out of a loop (tests/loop_invariant_bias_kernel.h; the plan is checked in
// tests/codegen/hoisted_conversions_test.cpp) on the GPU: c = a @ b + (K / 32) * bias, against the double
// reference and the interpreter, for loops of 1 to 12 iterations and 1 to 3 stages.
#include "loop_invariant_bias_kernel.h"

#include "dsl/interpreter.h"
#include "gpu/gpu_skip.h"
#include "jit/jit_kernel.h"
#include "kernels/compare.h"

#include <gtest/gtest.h>

#include <random>

using namespace kiln;

namespace {

TEST(GpuHoistedConversions, ALoopInvariantBiasMatchesTheReferenceAndTheInterpreter) {
  KILN_REQUIRE_GPU();
  for (int stages : {1, 2, 3}) {
    const Kernel k = kiln_test::loop_invariant_bias_kernel(stages);
    std::shared_ptr<JitKernel> jit = JitKernel::compile(k);
    for (int64_t K : {32, 96, 384}) {
      SCOPED_TRACE("stages " + std::to_string(stages) + " K " + std::to_string(K));
      std::mt19937_64 rng(7);
      std::uniform_real_distribution<double> dist(-1.0, 1.0);
      HostBuffer a(DType::f16, 64 * K, "a"), b(DType::f16, K * 64, "b"), bias(DType::f32, 64, "bias");
      for (HostBuffer* t : {&a, &b, &bias})
        for (int64_t i = 0; i < t->numel(); ++i)
          t->set(i, dist(rng));
      HostBuffer gpu(DType::f32, 64 * 64, "c"), interp(DType::f32, 64 * 64, "c");
      for (int64_t i = 0; i < gpu.numel(); ++i)
        gpu.set(i, std::nan("")); // poisoned
      auto args = [&](HostBuffer& c) {
        return std::vector<InterpArg>{InterpArg::ptr(a), InterpArg::ptr(b), InterpArg::ptr(bias), InterpArg::ptr(c),
                                      InterpArg::of_int(K)};
      };
      interpret(k, Grid{1, 1, 1}, args(interp));
      run_on_gpu(*jit, Grid{1, 1, 1}, args(gpu));
      std::vector<double> ref(64 * 64), g(64 * 64), i(64 * 64);
      for (int64_t r = 0; r < 64; ++r)
        for (int64_t c = 0; c < 64; ++c) {
          double s = static_cast<double>(K / 32) * bias.get(c);
          for (int64_t kk = 0; kk < K; ++kk)
            s += a.get(r * K + kk) * b.get(kk * 64 + c);
          const size_t e = static_cast<size_t>(r * 64 + c);
          ref[e] = s, g[e] = gpu.get(r * 64 + c), i[e] = interp.get(r * 64 + c);
        }
      const Comparison against_ref = compare_to_reference(g, ref);
      EXPECT_TRUE(against_ref.ok(1e-3)) << against_ref.str();
      const Comparison against_interp = compare_to_reference(g, i);
      EXPECT_TRUE(against_interp.ok(1e-3)) << against_interp.str();
    }
  }
}

} // namespace
