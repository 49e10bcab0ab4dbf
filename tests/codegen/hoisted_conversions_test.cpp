// Conversions of loop-invariant values are made once before the loop (plan_layout_conversions'
// LayoutConversion::hoisted_before; the emitter's emit_hoisted_conversions): the bias row of
// tests/loop_invariant_bias_kernel.h, loaded before a matmul loop and added to the accumulator in it, is
// converted before the loop, and the generated loop body has no conversion; a value the loop defines is
// converted where it is read. The CUDA compiles with NVRTC.
#include "loop_invariant_bias_kernel.h"

#include "codegen/describe_plan.h"
#include "nvrtc_compile.h"
#include "planned_kernel.h"

#include <gtest/gtest.h>

#include <set>

using namespace kiln;
using kiln_test::plan_kernel;
using kiln_test::Planned;

namespace {

TEST(HoistedConversions, ALoopInvariantRowIsConvertedOnceBeforeTheLoop) {
  for (const char* arch : {"sm_80", "sm_90a"}) {
    SCOPED_TRACE(arch);
    const Planned p = plan_kernel(kiln_test::loop_invariant_bias_kernel(3), arch);
    const std::string lowered = describe_plan(p.kernel, p.plan);
    const std::vector<const Op*> loops = kiln_test::ops_of(p.kernel, OpKind::For);
    ASSERT_EQ(loops.size(), 1u);
    // The one conversion through shared memory is the bias row's, made before the loop and read in it.
    std::set<ValueId> in_loop;
    walk(loops[0]->regions[0], [&](const Op& o) { in_loop.insert(o.results.begin(), o.results.end()); });
    ASSERT_EQ(p.plan.conversions_by(ConversionMethod::SharedMemory), 1) << lowered;
    for (const LayoutConversion& c : p.plan.conversions)
      if (c.method == ConversionMethod::SharedMemory) {
        EXPECT_FALSE(in_loop.count(c.value)) << lowered;
        EXPECT_TRUE(in_loop.count(c.user->result())) << "read in the loop";
        EXPECT_EQ(c.hoisted_before, loops[0]) << lowered;
      }
    EXPECT_NE(lowered.find("made once before the loop at"), std::string::npos) << lowered;
    const GeneratedKernel g = generate_cuda(p.kernel, Target::parse(arch));
    const size_t converted = g.source.find("converted once before the loop");
    const size_t loop = g.source.find("// for ");
    ASSERT_NE(converted, std::string::npos);
    ASSERT_NE(loop, std::string::npos);
    EXPECT_LT(converted, loop);
    EXPECT_EQ(g.source.find("through shared memory", loop), std::string::npos) << "no conversion in the loop";
    kiln_test::expect_nvrtc_compiles(g, arch);
  }
}

// A value defined in the loop (the accumulator's sum, read by the store after it in another layout) is not
// hoisted: only loop-invariant values are.
TEST(HoistedConversions, AValueTheLoopDefinesIsConvertedWhereItIsRead) {
  KernelBuilder kb("loop_defined_value");
  Value x = kb.arg_ptr("x", f32), out = kb.arg_ptr("out", f32);
  Value n = kb.arg("n", i32);
  Value acc = zeros({64}, f32);
  for_range(0, n, 1, [&](Value i) {
    Value tile = load(x + i * 4096 + arange(0, 4096), arange(0, 4096) < 4096, 0.0f).reshape({64, 64});
    acc = acc + sum(tile, 0);
  });
  store(out + arange(0, 64), acc, arange(0, 64) < 64);
  const Planned p = plan_kernel(kb.finish(), "sm_80");
  ASSERT_GE(p.plan.conversions_by(ConversionMethod::SharedMemory), 1) << describe_plan(p.kernel, p.plan);
  for (const LayoutConversion& c : p.plan.conversions)
    EXPECT_EQ(c.hoisted_before, nullptr) << describe_plan(p.kernel, p.plan);
}

} // namespace
