// analyze_contiguity: the width of pointer-tensor accesses in the plan, from the affine analysis and from the
// user's max_contiguous / multiple_of hints, and atomic adds whose old values nothing reads.
#include "codegen/analyze_contiguity.h"
#include "codegen/assign_layouts.h"
#include "codegen/choose_dot_lowering.h"
#include "codegen/schedule_async_copies.h"
#include "dsl/dsl.h"
#include "nvrtc_compile.h"

#include <gtest/gtest.h>

using namespace kiln;

namespace {

// out[i] = x[idx[i]] for 128 i: the gathered offsets come from memory, so no analysis can see their runs.
Kernel gather(int64_t contiguity_hint, int64_t alignment_hint) {
  Config c;
  c.num_warps = 1;
  KernelBuilder kb("gather", c);
  Value x = kb.arg_ptr("x", f32), idx = kb.arg_ptr("idx", i32), out = kb.arg_ptr("out", f32);
  Value offs = load(idx + arange(0, 128)); // (128,) i32
  if (contiguity_hint > 1)
    offs = max_contiguous(offs, contiguity_hint);
  Value ptrs = x + offs;
  if (alignment_hint > 1)
    ptrs = multiple_of(ptrs, alignment_hint);
  store(out + arange(0, 128), load(ptrs));
  return kb.finish();
}

LoweringPlan plan_of(const Kernel& k, const Target& t = Target::parse("sm_90a")) {
  LoweringPlan plan = assign_layouts(k, t, {});
  plan_shared_memory(plan);
  choose_dot_lowering(k, t, {}, plan);
  schedule_async_copies(k, t, {}, plan);
  analyze_contiguity(k, t, {}, plan);
  return plan;
}

// The accesses of a kernel in program order: (op kind, plan).
std::vector<std::pair<OpKind, AccessPlan>> accesses(const Kernel& k, const LoweringPlan& plan) {
  std::vector<std::pair<OpKind, AccessPlan>> out;
  walk(k.body, [&](const Op& op) {
    if (auto it = plan.accesses.find(&op); it != plan.accesses.end())
      out.emplace_back(op.kind, it->second);
  });
  return out;
}

TEST(AnalyzeContiguity, AffineIndicesAreVectorisedWithARunTimeAlignmentCheck) {
  Kernel k = gather(1, 1);
  auto a = accesses(k, plan_of(k));
  ASSERT_EQ(a.size(), 3u); // idx load, x gather, out store
  EXPECT_EQ(a[0].second.vector, 4) << "idx + arange: 4 i32 a thread, 16 bytes";
  EXPECT_FALSE(a[0].second.aligned);
  EXPECT_EQ(a[1].second.vector, 1) << "x + loaded offsets: nothing is known";
  EXPECT_EQ(a[2].second.vector, 4);
}

TEST(AnalyzeContiguity, MaxContiguousOnLoadedOffsetsVectorisesTheGather) {
  Kernel k = gather(2, 1);
  EXPECT_EQ(accesses(k, plan_of(k))[1].second.vector, 2);
  Kernel k8 = gather(8, 1);
  EXPECT_EQ(accesses(k8, plan_of(k8))[1].second.vector, 4) << "capped at the thread's 16-byte register run";
  EXPECT_FALSE(accesses(k8, plan_of(k8))[1].second.aligned);
}

TEST(AnalyzeContiguity, MultipleOfOnThePointersDropsTheAlignmentCheck) {
  Kernel k = gather(4, 16);
  const LoweringPlan plan = plan_of(k);
  EXPECT_EQ(accesses(k, plan)[1].second.vector, 4);
  EXPECT_TRUE(accesses(k, plan)[1].second.aligned);
  const GeneratedKernel g = generate_cuda(k, Target::parse("sm_90a"));
  EXPECT_NE(g.source.find("kiln::ld_global<16>("), std::string::npos);
  EXPECT_NE(g.lowered.find("4-element vectors (aligned by multiple_of)"), std::string::npos) << g.lowered;
  std::string why;
  if (rt::nvrtc_available(&why)) { // the hinted path compiles (NVRTC is there without a GPU too)
    EXPECT_FALSE(rt::compile_cuda(kiln_test::compile_request_for(g, "sm_90a")).cubin.empty());
  }
  Kernel k8 = gather(4, 8); // 8-byte aligned addresses do not make a 16-byte access aligned
  EXPECT_FALSE(accesses(k8, plan_of(k8))[1].second.aligned);
}

TEST(AnalyzeContiguity, UnreadAtomicAddsAreReductions) {
  Config c;
  c.num_warps = 1;
  KernelBuilder kb("accumulate", c);
  Value acc = kb.arg_ptr("acc", f32), old = kb.arg_ptr("old", f32);
  Value offs = arange(0, 128);
  atomic_add(acc + offs, full({128}, 1.0, f32));                    // nothing reads the old values
  store(old + offs, atomic_add(acc + offs, full({128}, 2.0, f32))); // these are read
  Kernel k = kb.finish();
  auto hopper = accesses(k, plan_of(k));
  ASSERT_EQ(hopper.size(), 3u);
  EXPECT_TRUE(hopper[0].second.reduce_only);
  EXPECT_GT(hopper[0].second.vector, 1) << "f32 reductions go in vectors on sm_90";
  EXPECT_FALSE(hopper[1].second.reduce_only);
  EXPECT_EQ(hopper[1].second.vector, 1) << "atom returns one old value per element";
  auto ampere = accesses(k, plan_of(k, Target::parse("sm_80")));
  EXPECT_TRUE(ampere[0].second.reduce_only);
  EXPECT_EQ(ampere[0].second.vector, 1) << "no vector red before sm_90";
}

} // namespace
