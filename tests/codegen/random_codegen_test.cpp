// The CUDA text of rand / randn: each draw calls the Philox prelude (codegen/prelude/kiln_philox.cuh) with its
// seed and offset widened to 64 bits, on tiles and on scalars; the prelude comes once, only in kernels that
// draw; the IR names the distribution; a scalar store is written by one thread; the text compiles with NVRTC
// where NVRTC is usable.
#include "random_kernel.h"

#include "codegen/codegen.h"
#include "dsl/printer.h"
#include "nvrtc_compile.h"
#include "source_text.h"

#include <gtest/gtest.h>

using namespace kiln;
using kiln_test::occurrences;

namespace {

TEST(RandomCodegen, PrinterNamesTheDistribution) {
  const std::string ir = print_kernel(kiln_test::random_kernel());
  EXPECT_EQ(occurrences(ir, "rand uniform"), 2) << ir;
  EXPECT_EQ(occurrences(ir, "rand normal"), 1) << ir;
}

TEST(RandomCodegen, DrawsCallThePhiloxPreludeOnTilesAndScalars) {
  for (const char* arch : {"sm_80", "sm_90a"}) {
    const GeneratedKernel g = generate_cuda(kiln_test::random_kernel(), Target::parse(arch));
    EXPECT_EQ(occurrences(g.source, "PhiloxBlock philox4x32_10("), 1) << arch << ": the prelude once";
    EXPECT_EQ(occurrences(g.source, "kiln::philox_uniform((long long)("), 2) << arch << ": tile and scalar\n"
                                                                             << g.source;
    EXPECT_EQ(occurrences(g.source, "kiln::philox_normal((long long)("), 1) << arch;
    EXPECT_EQ(occurrences(g.source, "if (threadIdx.x == 0) *"), 1) << arch << ": the scalar draw, stored by one thread";
    kiln_test::expect_nvrtc_compiles(g, arch);
  }
}

TEST(RandomCodegen, KernelsThatDoNotDrawHaveNoGenerator) {
  KernelBuilder kb("no_draws");
  Value x = kb.arg_ptr("x", f32);
  store(x + arange(0, 128), zeros({128}, f32) + 1.0);
  const GeneratedKernel g = generate_cuda(kb.finish(), Target::parse("sm_80"));
  EXPECT_EQ(g.source.find("philox"), std::string::npos);
}

} // namespace
