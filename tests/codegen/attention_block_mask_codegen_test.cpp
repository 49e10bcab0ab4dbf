// Block masks (attention_block_mask.h) through the code generator: the classifier kernel (with and without
// mask mods reading tensors, both orientations), the forward over a block mask's lists and the backward's dK/dV
// and dQ over them (the built-in causal rule, mods with tensors, f16/bf16/f32, both K variants, sm_90a and
// sm_80) generate CUDA that NVRTC compiles (where NVRTC is usable); runs of tiles are pipelined as the
// built-in kernels' ranges, lists walked tile by tile are not.
#include "kernels/attention/attention_block_mask.h"
#include "kernels/attention/attention_bwd_problem.h"
#include "kernels/attention/fa2_bwd_block_mask.h"
#include "kernels/attention/fa2_bwd_dq.h"
#include "kernels/attention/attention_mod_library.h"
#include "kernels/attention/attention_problem.h"
#include "kernels/attention/fa2_fwd.h"
#include "nvrtc_compile.h"
#include "planned_kernel.h"

#include <gtest/gtest.h>

using namespace kiln;
using kiln_test::expect_nvrtc_compiles;

namespace {

AttentionMods document_window_softcap() {
  AttentionMods m;
  m.mask = {document_mask(), sliding_window(256, 0)};
  m.score = {softcap(30)};
  return m;
}

GeneratedKernel generate(const KernelDef& def, const Config& config, const char* arch) {
  def.check(config);
  return generate_cuda(def.build(config), Target::parse(arch));
}

// fa2_fwd_block_mask's warp-specialised kernel of key ranges (BLOCK_MASK_RUNS=1) at D = 128, 128 x 64 tiles
// over two consumer warpgroups, with the built-in CAUSAL mode `causal`.
Config warp_specialised_runs_config(int causal) {
  AttentionProblem p;
  p.D = 128;
  p.causal = causal;
  Config c = default_fa2_config(p);
  c.set("BLOCK_M", 128).set("BLOCK_N", 64).set("WARP_SPECIALIZE", 1).set("BLOCK_MASK_RUNS", 1);
  c.num_warps = 8;
  return c;
}

TEST(BlockMaskCodegen, ClassifierCompiles) {
  for (const AttentionMods& mods : {AttentionMods{}, document_window_softcap()})
    for (int causal : {0, 2}) {
      const KernelDef& def = attention_block_mask_def(mods);
      Config c = def.default_config();
      c.set("BLOCK_M", 128).set("BLOCK_N", 64).set("CAUSAL", causal).set("BY_KEY", causal == 2);
      SCOPED_TRACE(def.name + " " + c.str());
      GeneratedKernel g = generate(def, c, "sm_90a");
      EXPECT_NE(g.source.find("partial_index"), std::string::npos);
      if (!mods.empty()) {
        EXPECT_NE(g.source.find("mod_q_doc"), std::string::npos);
      }
      expect_nvrtc_compiles(g, "sm_90a");
    }
}

TEST(BlockMaskCodegen, ForwardOverTheListsCompilesForSm90aAndSm80) {
  struct Variant {
    const char* label;
    AttentionMods mods;
    int causal;
    DType dtype;
    bool k_transposed;
  };
  const Variant variants[] = {{"builtin_causal", {}, 1, DType::f16, true},
                              {"mods_bf16", document_window_softcap(), 0, DType::bf16, true},
                              {"mods_k_row_major", document_window_softcap(), 0, DType::f16, false},
                              {"f32", {}, 2, DType::f32, true}};
  for (const Variant& v : variants)
    for (const char* arch : {"sm_90a", "sm_80"}) {
      AttentionProblem p;
      p.D = 128;
      p.causal = v.causal;
      p.dtype = v.dtype;
      p.k_transposed = v.k_transposed;
      Config c = default_fa2_config(p);
      SCOPED_TRACE(std::string(v.label) + " " + arch + " " + c.str());
      GeneratedKernel g = generate(fa2_fwd_block_mask_def(v.mods), c, arch);
      for (const char* arg : {"bm_full_count", "bm_full_index", "bm_partial_count", "bm_partial_index"})
        EXPECT_NE(g.source.find(arg), std::string::npos) << arg;
      expect_nvrtc_compiles(g, arch);
    }
}

// A list that is one run of consecutive tiles (causal's full tiles, its diagonal) is walked as a key range,
// whose loop the pipeliner takes as it takes fa2_fwd's own (a carried block pointer advanced by BLOCK_N); a
// list walked tile by tile makes its block pointers anew from a loaded index each iteration and is not
// pipelined. So the forward over a block mask has two pipelined loops, as fa2_fwd's causal path has.
TEST(BlockMaskCodegen, RunsOfTilesArePipelinedAsTheBuiltInPath) {
  AttentionProblem p;
  p.D = 128;
  p.causal = 1;
  const Config c = default_fa2_config(p);
  for (const char* arch : {"sm_90a", "sm_80"}) {
    SCOPED_TRACE(arch);
    const kiln_test::Planned plain = kiln_test::plan_kernel(fa2_fwd_def().build(c), arch);
    const kiln_test::Planned listed = kiln_test::plan_kernel(fa2_fwd_block_mask_def().build(c), arch);
    EXPECT_EQ(plain.plan.pipelined.size(), 2u);
    EXPECT_EQ(listed.plan.pipelined.size(), plain.plan.pipelined.size());
  }
}

// dK/dV over the by-key lists and dQ over the forward's, for both targets, with and without mods.
TEST(BlockMaskCodegen, BackwardOverTheListsCompilesForSm90aAndSm80) {
  for (const AttentionMods& mods : {AttentionMods{}, document_window_softcap()})
    for (const char* arch : {"sm_90a", "sm_80"}) {
      AttentionProblem p;
      p.D = 64;
      p.causal = mods.empty() ? 2 : 0;
      const AttentionBwdConfigs configs = default_bwd_configs(p);
      for (const KernelDef* def : {&fa2_bwd_dkdv_block_mask_def(mods), &fa2_bwd_dq_block_mask_def(mods)}) {
        const Config& c = def == &fa2_bwd_dq_block_mask_def(mods) ? configs.dq : configs.dkdv;
        SCOPED_TRACE(def->name + " " + arch + " " + c.str());
        GeneratedKernel g = generate(*def, c, arch);
        EXPECT_NE(g.source.find("bm_partial_index"), std::string::npos);
        expect_nvrtc_compiles(g, arch);
      }
    }
}

// The backward's runs of tiles are key (dQ) or query (dK/dV) ranges whose loops the pipeliner takes: over a
// causal block mask, as many pipelined loops as the built-in causal kernels have where they have two.
TEST(BlockMaskCodegen, TheBackwardsRunsOfTilesArePipelined) {
  AttentionProblem p;
  p.D = 64;
  p.causal = 1;
  const AttentionBwdConfigs c = default_bwd_configs(p);
  for (const char* arch : {"sm_90a", "sm_80"}) {
    SCOPED_TRACE(arch);
    const kiln_test::Planned dq = kiln_test::plan_kernel(fa2_bwd_dq_def().build(c.dq), arch);
    const kiln_test::Planned dq_listed = kiln_test::plan_kernel(fa2_bwd_dq_block_mask_def().build(c.dq), arch);
    EXPECT_EQ(dq.plan.pipelined.size(), 2u);
    EXPECT_EQ(dq_listed.plan.pipelined.size(), dq.plan.pipelined.size());
    const kiln_test::Planned dkdv_listed = kiln_test::plan_kernel(fa2_bwd_dkdv_block_mask_def().build(c.dkdv), arch);
    EXPECT_EQ(dkdv_listed.plan.pipelined.size(), 2u);
  }
}

// A block mask whose lists are all runs runs the kernel of two key ranges (BLOCK_MASK_RUNS=1), which is
// warp-specialised like fa2_fwd: its loops' bounds come from scalar loads of the lists, which the producer
// makes itself (the lists are never written by the kernel). The general kernel keeps its list loops and is
// refused WARP_SPECIALIZE at build time.
TEST(BlockMaskCodegen, RunsOnlyKernelIsWarpSpecialisedWithTheListsReadByTheProducer) {
  const Config c = warp_specialised_runs_config(1);
  for (const AttentionMods& mods : {AttentionMods{}, document_window_softcap()}) {
    const kiln_test::Planned runs = kiln_test::plan_kernel(fa2_fwd_block_mask_def(mods).build(c), "sm_90a");
    SCOPED_TRACE(mods.name());
    const WarpSpecialization& ws = runs.plan.ws;
    ASSERT_TRUE(ws.on()) << ws.why_not;
    EXPECT_EQ(ws.loops.size(), 2u);
    int loads = 0;
    for (const Op* op : ws.producer_ops)
      loads += op->kind == OpKind::Load;
    EXPECT_EQ(loads, 6) << "each list's count, first and last tile";
  }
  Config general = c;
  general.set("BLOCK_MASK_RUNS", 0);
  EXPECT_THROW((void)fa2_fwd_block_mask_def().build(general), Error);
}

// Beside wgmma, a scalar read from memory is broadcast by a warp reduction (kiln::warp_uniform) so that ptxas
// knows the loop it bounds is not divergent (else it serialises the loop's wgmma: C7520, worklog §47): the
// consumers' six list reads are, the producer's (one thread issues TMA alone) are not, and sm_80's code,
// without wgmma, reads them plainly.
TEST(BlockMaskCodegen, ListReadsAreWarpUniformBesideWgmma) {
  const Config c = warp_specialised_runs_config(1);
  auto count = [](const std::string& text, const std::string& what) {
    int n = 0;
    for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1))
      ++n;
    return n;
  };
  const std::string source = generate(fa2_fwd_block_mask_def(), c, "sm_90a").source;
  const size_t consumers = source.find("the consumers: the program");
  ASSERT_NE(consumers, std::string::npos);
  const size_t producer = source.find("the producer warpgroup");
  ASSERT_NE(producer, std::string::npos);
  EXPECT_EQ(count(source.substr(producer, consumers - producer), "kiln::warp_uniform("), 0);
  EXPECT_EQ(count(source.substr(consumers), "kiln::warp_uniform(*"), 6);
  EXPECT_EQ(count(source, "__reduce_max_sync"), count(source.substr(0, consumers), "__reduce_max_sync"))
      << "the helper is defined once, before the kernel";

  Config sm80 = c;
  sm80.set("WARP_SPECIALIZE", 0);
  EXPECT_EQ(count(generate(fa2_fwd_block_mask_def(), sm80, "sm_80").source, "warp_uniform"), 0);
}

TEST(BlockMaskCodegen, RunsOnlyWarpSpecialisedKernelCompiles) {
  const Config c = warp_specialised_runs_config(0);
  GeneratedKernel g = generate(fa2_fwd_block_mask_def(document_window_softcap()), c, "sm_90a");
  EXPECT_TRUE(g.why_not_warp_specialized.empty()) << g.why_not_warp_specialized;
  expect_nvrtc_compiles(g, "sm_90a");
}

// The same kernel on a dynamic persistent grid (PERSISTENT=2): the producer draws the programs and reads each
// one's lists, the consumers take the ids from its ring.
TEST(BlockMaskCodegen, RunsOnlyKernelOnADynamicPersistentGridCompiles) {
  Config c = warp_specialised_runs_config(1);
  c.set("PERSISTENT", 2);
  GeneratedKernel g = generate(fa2_fwd_block_mask_def(document_window_softcap()), c, "sm_90a");
  EXPECT_TRUE(g.why_not_warp_specialized.empty()) << g.why_not_warp_specialized;
  EXPECT_TRUE(g.persistent_dynamic) << g.why_not_persistent;
  expect_nvrtc_compiles(g, "sm_90a");
}

} // namespace
