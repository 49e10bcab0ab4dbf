// A streaming loop (tests/chunked_logsumexp_kernel.h: a 16-bit tile read through a block pointer each step,
// f32 running state carried beside it) lowers with no layout conversion at all: the carried tiles start in
// the layout of the loop's load (assign_layouts), and the load reads each thread's run of registers in one
// 16-byte ld.global (analyze_contiguity's block-load pieces). The generated CUDA compiles with NVRTC on both
// archs.
#include "chunked_logsumexp_kernel.h"

#include "codegen/describe_plan.h"
#include "nvrtc_compile.h"
#include "planned_kernel.h"

#include <gtest/gtest.h>

using namespace kiln;
using kiln_test::ChunkedLogsumexp;
using kiln_test::plan_kernel;
using kiln_test::Planned;

namespace {

class StreamingLoopCodegen : public ::testing::TestWithParam<ChunkedLogsumexp> {};

TEST_P(StreamingLoopCodegen, NoConversionsAndVectorBlockLoads) {
  const ChunkedLogsumexp& c = GetParam();
  for (const char* arch : {"sm_80", "sm_90a"}) {
    SCOPED_TRACE(arch);
    const Planned p = plan_kernel(kiln_test::chunked_logsumexp_kernel(c), arch);
    EXPECT_TRUE(p.plan.conversions.empty()) << describe_plan(p.kernel, p.plan);
    const std::vector<const Op*> loads = kiln_test::ops_of(p.kernel, OpKind::LoadBlock);
    ASSERT_EQ(loads.size(), 1u);
    ASSERT_EQ(p.plan.where(loads[0]->result()), Placement::Registers);
    // 16 bytes a piece: 8 elements of a 16-bit dtype, 4 of f32.
    EXPECT_EQ(p.plan.block_accesses.at(loads[0]).piece, 16 / dtype_bytes(c.dtype));
    // The running state is in the load's layout: the same bases, element for element.
    const std::vector<const Op*> loops = kiln_test::ops_of(p.kernel, OpKind::For);
    ASSERT_EQ(loops.size(), 1u);
    for (ValueId carried : loops[0]->results) {
      if (p.plan.where(carried) != Placement::Registers)
        continue; // the block pointer
      EXPECT_TRUE(p.plan.layout.at(carried).same_bases(p.plan.layout.at(loads[0]->result())))
          << p.plan.layout.at(carried).bases_str() << " vs "
          << p.plan.layout.at(loads[0]->result()).bases_str();
    }
    const GeneratedKernel g = generate_cuda(p.kernel, Target::parse(arch));
    EXPECT_NE(g.source.find("kiln::ld_global<16>"), std::string::npos) << "a 16-byte block load";
    kiln_test::expect_nvrtc_compiles(g, arch);
  }
}

INSTANTIATE_TEST_SUITE_P(cases, StreamingLoopCodegen,
                         ::testing::Values(ChunkedLogsumexp{DType::f16, 4, 256, 4},
                                           ChunkedLogsumexp{DType::bf16, 2, 512, 4},
                                           ChunkedLogsumexp{DType::f32, 4, 256, 8},
                                           ChunkedLogsumexp{DType::f16, 1, 1024, 4}),
                         [](const auto& info) { return kiln_test::label(info.param); });

// A block load whose layout gives each thread single elements along the contiguous dim (a column-major block
// pointer read in the default row-major layout) stays element by element.
TEST(StreamingLoopCodegen, ColumnMajorBlockLoadIntoRowMajorRegistersIsNotVectorised) {
  KernelBuilder kb("column_major_load");
  Value x = kb.arg_ptr("x", f16), out = kb.arg_ptr("out", f16);
  Value n = kb.arg("n", i32);
  Value t = load(make_block_ptr(x, {n, n}, {1, n}, {0, 0}, {32, 32}, {0, 1}), BoundaryCheck{0, 1});
  store(make_block_ptr(out, {n, n}, {n, 1}, {0, 0}, {32, 32}, {1, 0}), t, BoundaryCheck{0, 1});
  const Planned p = plan_kernel(kb.finish(), "sm_80");
  const std::vector<const Op*> loads = kiln_test::ops_of(p.kernel, OpKind::LoadBlock);
  ASSERT_EQ(loads.size(), 1u);
  EXPECT_EQ(p.plan.block_accesses.at(loads[0]).piece, 0);
  kiln_test::expect_nvrtc_compiles(generate_cuda(p.kernel, Target::parse("sm_80")), "sm_80");
}

} // namespace
