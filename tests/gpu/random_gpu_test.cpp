// rand / randn on the GPU against the interpreter (docs: the same numbers for the same seed and offsets). The
// uniform draws are integer arithmetic and one exact conversion: equal bit for bit. The normal draws end in
// double-precision log, cos and sqrt, which CUDA's libdevice and the host's libm may round differently in the
// last bit of a double; rounded to f32 they agree, or differ by one f32 ulp where the double lands on a tie.
#include "random_kernel.h"

#include "dsl/interpreter.h"
#include "gpu/gpu_skip.h"
#include "jit/jit_kernel.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace kiln;

namespace {

TEST(GpuRandom, SameNumbersAsTheInterpreter) {
  KILN_REQUIRE_GPU();
  const int64_t programs = 64, n = programs * kiln_test::kRandomTile;
  const int64_t seed = 0x5eed0000cafeLL, base = (int64_t{1} << 33) - 1000; // offsets cross 2^33
  const Kernel k = kiln_test::random_kernel();
  HostBuffer u(DType::f32, n, "u"), nrm(DType::f32, n, "n"), s(DType::f32, programs, "s");
  HostBuffer gu = u, gn = nrm, gs = s;
  interpret(k, Grid{programs, 1, 1},
            {InterpArg::ptr(u), InterpArg::ptr(nrm), InterpArg::ptr(s), InterpArg::of_int(seed),
             InterpArg::of_int(base)});
  run_on_gpu(*JitKernel::compile(k), Grid{programs, 1, 1},
             {InterpArg::ptr(gu), InterpArg::ptr(gn), InterpArg::ptr(gs), InterpArg::of_int(seed),
              InterpArg::of_int(base)});
  int64_t normal_ulp_diffs = 0;
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_EQ(gu.get(i), u.get(i)) << "uniform draw " << i;
    const float want = static_cast<float>(nrm.get(i)), got = static_cast<float>(gn.get(i));
    if (got != want) {
      ++normal_ulp_diffs;
      ASSERT_TRUE(got == std::nextafter(want, INFINITY) || got == std::nextafter(want, -INFINITY))
          << "normal draw " << i << ": GPU " << got << ", interpreter " << want;
    }
  }
  for (int64_t p = 0; p < programs; ++p)
    ASSERT_EQ(gs.get(p), s.get(p)) << "scalar draw " << p;
  std::printf("normal draws one f32 ulp apart: %lld of %lld\n", static_cast<long long>(normal_ulp_diffs),
              static_cast<long long>(n));
  EXPECT_LT(normal_ulp_diffs, n / 100);
}

} // namespace
