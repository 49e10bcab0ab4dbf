// atomic_add through a block pointer (tests/block_atomic_add_kernel.h) as the code generator issues it
// (codegen/plan_bulk_reductions.h): on sm_90a an f32 block goes through a shared-memory stage and one bulk
// reduction a row; on sm_80, for other dtypes, for rows under 16 bytes, with the TMA unit off, or where the kernel
// also loads through the tensor's pointer, it adds element by element and the plan says why. Everything compiles
// with NVRTC. An f32 block that adds from registers on sm_90a does so by vector reductions.
#include "block_atomic_add_kernel.h"

#include "codegen/codegen.h"
#include "nvrtc_compile.h"
#include "planned_kernel.h"
#include "source_text.h"

#include <gtest/gtest.h>

#include <functional>

using namespace kiln;

namespace {

using kiln_test::has;

TEST(BulkReductions, AnF32BlockOnSm90aGoesThroughTheStageOneBulkReductionARow) {
  const kiln_test::Planned p = kiln_test::plan_kernel(kiln_test::block_atomic_add_kernel(64, 32, f32, 4), "sm_90a");
  ASSERT_EQ(p.plan.bulk.ops.size(), 1u);
  const BulkReduction& b = p.plan.bulk.ops.begin()->second;
  EXPECT_EQ(b.row_dim, 0);
  EXPECT_EQ(b.col_dim, 1);
  EXPECT_EQ(b.rows, 64);
  EXPECT_EQ(b.cols, 32);
  EXPECT_EQ(p.plan.bulk.stage_bytes, b.rows * b.cols * 4); // rows back to back, each 16-byte aligned
  EXPECT_GE(p.plan.bulk.stage_offset, p.plan.tiles_bytes + p.plan.scratch_bytes); // after what others reuse
  EXPECT_EQ(p.plan.bulk.stage_offset % 16, 0);

  const GeneratedKernel g = generate_cuda(kiln_test::block_atomic_add_kernel(64, 32, f32, 4), Target::parse("sm_90a"));
  EXPECT_TRUE(has(g.lowered, "through the stage, one bulk reduction for the block where its rows are contiguous"))
      << g.lowered;
  EXPECT_EQ(g.shared_bytes, p.plan.bulk.end());
  for (const char* s : {"kiln::fence_proxy_async();", "kiln::bulk_reduce_add(", "kiln::bulk_commit();",
                        "kiln::bulk_wait_read<0>();", "kiln::bulk_wait<0>();"})
    EXPECT_TRUE(has(g.source, s)) << s;
  kiln_test::expect_nvrtc_compiles(g, "sm_90a");
}

// Two stages where two fit: the uses alternate, each waits for the previous use's reads and passes one CTA barrier
// (after writing); one stage where two do not fit (256 x 128 f32: 136 KB a stage), waiting before it writes.
TEST(BulkReductions, UsesAlternateBetweenTwoStagesWhereTwoFit) {
  struct Case {
    int64_t rows, cols;
    int stages;
  };
  for (const Case& c : {Case{64, 32, 2}, Case{256, 128, 1}}) {
    SCOPED_TRACE(fmt::format("{} x {}", c.rows, c.cols));
    const kiln_test::Planned p =
        kiln_test::plan_kernel(kiln_test::block_atomic_add_kernel(c.rows, c.cols, f32, 4), "sm_90a");
    ASSERT_TRUE(p.plan.bulk.any());
    EXPECT_EQ(p.plan.bulk.stages, c.stages);
    EXPECT_EQ(p.plan.bulk.end(), p.plan.bulk.stage_offset + c.stages * p.plan.bulk.stage_bytes);
    const GeneratedKernel g = generate_cuda(p.kernel, Target::parse("sm_90a"));
    EXPECT_EQ(g.shared_bytes, p.plan.bulk.end());
    EXPECT_EQ(has(g.source, "kiln_bulk_stage ^= 1;"), c.stages == 2);
    EXPECT_EQ(has(g.lowered, "bulk-reduction stages: 2 x "), c.stages == 2) << g.lowered;
    // The write, then the wait for the reads (two stages); the wait, then the write (one).
    const size_t write = g.source.find("kiln_stage["), wait = g.source.find("kiln::bulk_wait_read<0>();");
    ASSERT_NE(write, std::string::npos);
    ASSERT_NE(wait, std::string::npos);
    EXPECT_EQ(wait > write, c.stages == 2);
    kiln_test::expect_nvrtc_compiles(g, "sm_90a");
  }
}

TEST(BulkReductions, ElsewhereTheBlockAddsElementByElementAndThePlanSaysWhy) {
  struct Case {
    const char* what;
    std::function<Kernel()> kernel;
    std::string arch;
    CodegenOptions options;
    const char* why;
  };
  CodegenOptions no_tma;
  no_tma.tma = false;
  const Case cases[] = {
      {"sm_80", [] { return kiln_test::block_atomic_add_kernel(64, 32, f32, 4); }, "sm_80", {}, "need sm_90"},
      {"f16", [] { return kiln_test::block_atomic_add_kernel(64, 32, f16, 4); }, "sm_90a", {},
       "add f32 here, the block is f16"},
      {"i32", [] { return kiln_test::block_atomic_add_kernel(64, 32, i32, 4); }, "sm_90a", {},
       "add f32 here, the block is i32"},
      {"8-byte rows", [] { return kiln_test::block_atomic_add_kernel(64, 2, f32, 4); }, "sm_90a", {},
       "rows are 8 bytes"},
      {"TMA off", [] { return kiln_test::block_atomic_add_kernel(64, 32, f32, 4); }, "sm_90a", no_tma,
       "the TMA unit is off"},
      {"loads y", [] { return kiln_test::block_atomic_add_kernel(64, 32, f32, 4, /*also_loads_y=*/true); }, "sm_90a",
       {}, "also reads through 'y'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    const kiln_test::Planned p = kiln_test::plan_kernel(c.kernel(), c.arch, c.options);
    EXPECT_FALSE(p.plan.bulk.any());
    EXPECT_EQ(p.plan.bulk.stage_bytes, 0);
    ASSERT_EQ(p.plan.bulk.why_not.size(), 1u);
    EXPECT_TRUE(has(p.plan.bulk.why_not.begin()->second, c.why)) << p.plan.bulk.why_not.begin()->second;
    const GeneratedKernel g = generate_cuda(c.kernel(), Target::parse(c.arch), c.options);
    // From registers: f32 on sm_90 in vector reductions (element by element where a piece is misaligned, strided or
    // cut by the edge), anything else element by element.
    const Kernel k = c.kernel();
    const bool vectors = c.arch == "sm_90a" && k.type(k.params[1].value).elem == f32; // y, the added-to tensor
    EXPECT_TRUE(has(g.lowered, vectors ? "-element vector reductions from registers (" : "element by element ("))
        << g.lowered;
    EXPECT_EQ(has(g.source, "kiln::red_add_v"), vectors);
    EXPECT_TRUE(has(g.source, "kiln::red_add("));
    EXPECT_FALSE(has(g.source, "kiln::bulk_reduce_add("));
    kiln_test::expect_nvrtc_compiles(g, c.arch);
  }
}

// The stage is left out where it would keep the CTAs that MIN_BLOCKS_PER_SM asks to share an SM from fitting there
// (and taken where they fit with it, or would not fit without it either).
TEST(BulkReductions, TheStageKeepsTheCtasMinBlocksPerSmAsksForOnAnSm) {
  struct Case {
    int64_t min_blocks;
    bool bulk;
  };
  // The fused backward's dK/dV at D = 128 over one warp-specialised warpgroup: 106 KB of tiles and scratch, 34 KB of
  // stage; two such CTAs fit an H100's 228 KB without the stage, not with it.
  for (const Case& c : {Case{1, true}, Case{2, false}}) {
    SCOPED_TRACE(c.min_blocks);
    const kiln_test::Planned p = kiln_test::plan_for("fa2_bwd_dkdv",
                                                     {{"ATOMIC_DQ", 1},
                                                      {"HEAD_DIM", 128},
                                                      {"BLOCK_N", 64},
                                                      {"BLOCK_M", 64},
                                                      {"num_warps", 4},
                                                      {"WARP_SPECIALIZE", 1},
                                                      {"MIN_BLOCKS_PER_SM", c.min_blocks}},
                                                     "sm_90a");
    EXPECT_EQ(p.plan.bulk.any(), c.bulk);
    if (!c.bulk) {
      ASSERT_FALSE(p.plan.bulk.why_not.empty());
      EXPECT_TRUE(has(p.plan.bulk.why_not.begin()->second, "MIN_BLOCKS_PER_SM=2 of them do not fit"))
          << p.plan.bulk.why_not.begin()->second;
      // From registers by vector reductions, as the pointer tensor's adds were.
      const GeneratedKernel g = generate_cuda(p.kernel, Target::parse("sm_90a"));
      EXPECT_TRUE(has(g.source, "kiln::red_add_v2(")) << g.lowered;
      EXPECT_TRUE(has(g.lowered, "2-element vector reductions from registers (with its stage")) << g.lowered;
    }
  }
  // At D = 64 two CTAs fit with the stage.
  const kiln_test::Planned d64 = kiln_test::plan_for("fa2_bwd_dkdv",
                                                     {{"ATOMIC_DQ", 1},
                                                      {"BLOCK_N", 64},
                                                      {"BLOCK_M", 64},
                                                      {"num_warps", 4},
                                                      {"WARP_SPECIALIZE", 1},
                                                      {"MIN_BLOCKS_PER_SM", 2}},
                                                     "sm_90a");
  EXPECT_TRUE(d64.plan.bulk.any());
}

} // namespace
