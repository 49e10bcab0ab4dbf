// The code generator accepts every config the attention sweep uses (FA1 and FA2), and every matmul
// config space entry; NVRTC compiles a sample of them (the whole set is compiled by the GPU suite).
#include "codegen/codegen.h"
#include "interp/attention_test_cases.h"
#include "kernels/attention/fa1_fwd.h"
#include "kernels/attention/fa2_fwd.h"
#include "kernels/builtin.h"
#include "runtime/compiler.h"
#include "runtime/nvrtc.h"

#include <gtest/gtest.h>

using namespace kiln;
using namespace kiln::testing_support;

namespace {

TEST(SweepCodegen, EveryAttentionCaseGenerates) {
  int n = 0;
  for (const AttentionCase& c : attention_sweep()) {
    Config fa2 = default_fa2_config(c.problem);
    fa2.set("BLOCK_M", std::max<int64_t>(c.block_m, 64)).set("BLOCK_N", std::max<int64_t>(c.block_n, 32));
    Config fa1 = default_fa1_config(c.problem);
    fa1.set("BLOCK_M", c.block_m).set("BLOCK_N", c.block_n);
    for (auto& [kernel, config] : {std::pair{build_fa2_fwd(fa2), fa2}, std::pair{build_fa1_fwd(fa1), fa1}}) {
      SCOPED_TRACE(attention_case_name(c) + " " + config.str());
      GeneratedKernel g = generate_cuda(kernel, Target::parse("sm_90a"));
      EXPECT_FALSE(g.source.empty());
      ++n;
    }
  }
  EXPECT_GT(n, 40);
}

TEST(SweepCodegen, EveryConfigSpaceEntryGenerates) {
  // Every entry generates for sm_90a, the arch the spaces are sized for. On sm_80, whose blocks get less shared
  // memory, an entry either generates or is refused with a TargetLimitError before emitting (the tuner prunes
  // it); most must generate there too.
  for (const KernelDef& def : builtin_kernels().all()) {
    int64_t generated_on_sm80 = 0, entries = 0;
    for (const Config& c : def.config_space()) {
      SCOPED_TRACE(def.name + " " + c.str());
      ++entries;
      EXPECT_GT(generate_cuda(def.build(c), Target::parse("sm_90a")).threads, 0);
      try {
        EXPECT_GT(generate_cuda(def.build(c), Target::parse("sm_80")).threads, 0);
        ++generated_on_sm80;
      } catch (const TargetLimitError& e) {
        EXPECT_NE(std::string(e.what()).find("sm_80 allows at most"), std::string::npos) << e.what();
      }
    }
    EXPECT_GT(generated_on_sm80 * 2, entries) << def.name << ": most of the space should fit sm_80";
  }
}

} // namespace

namespace {

// Whether `c` generates for `arch` (false: refused for the arch's limits).
bool fits(const Config& c, const char* arch) {
  try {
    (void)generate_cuda(fa2_fwd_def().build(c), Target::parse(arch));
    return true;
  } catch (const TargetLimitError&) {
    return false;
  }
}

TEST(SweepCodegen, EveryAttentionDtypeAndHeadDimHasConfigsThatFitEachArch) {
  // f32 at HEAD_DIM = 256 once fitted no config of the space and not the default on any GPU. The default must
  // fit sm_80 and sm_90a; the space must hold a config for every arch (the tuner falls back to it on sm_86).
  for (DType dt : {DType::f16, DType::bf16, DType::f32})
    for (int64_t d : {16, 64, 128, 160, 256}) {
      AttentionProblem p;
      p.dtype = dt;
      p.D = d;
      p.causal = 1;
      SCOPED_TRACE(p.str());
      const Config def = default_fa2_config(p);
      EXPECT_TRUE(fits(def, "sm_80")) << def.str();
      EXPECT_TRUE(fits(def, "sm_90a")) << def.str();
      for (const char* arch : {"sm_80", "sm_86", "sm_90a"}) {
        bool any = false;
        for (const Config& c : fa2_config_space(p))
          any = any || fits(c, arch);
        EXPECT_TRUE(any) << "no config of the space fits " << arch;
      }
    }
}

} // namespace

namespace {

// Small tiles against many warps: every dot of a kernel must split over the same warps (FA2's S is BLOCK_M x
// BLOCK_N, its P V BLOCK_M x HEAD_DIM; the backward's products mix all three). A config is either generated
// or refused with a kiln::Error; an InternalError (the warp split of one dot not dividing another's tile, seen
// at BLOCK_M=16, HEAD_DIM=16, 4 warps) fails the test.
TEST(SweepCodegen, SmallTilesWithManyWarpsGenerateOrAreRefusedClearly) {
  int generated = 0;
  for (const char* name : {"fa2_fwd", "fa1_fwd", "fa2_bwd_dkdv", "fa2_bwd_dq"}) {
    const KernelDef& def = builtin_kernels().find(name);
    for (int64_t bm : {16, 32})
      for (int64_t bn : {16, 32, 64})
        for (int64_t d : {16, 32, 64})
          for (int64_t warps : {1, 2, 4, 8})
            for (const char* arch : {"sm_80", "sm_90a"}) {
              std::map<std::string, int64_t> o = {{"BLOCK_M", bm}, {"BLOCK_N", bn}, {"HEAD_DIM", d},
                                                  {"num_warps", warps}};
              SCOPED_TRACE(fmt::format("{} BLOCK_M={} BLOCK_N={} HEAD_DIM={} num_warps={} {}", name, bm, bn, d,
                                       warps, arch));
              try {
                const Kernel k = def.build(def.with_overrides(def.default_config(), o));
                EXPECT_FALSE(generate_cuda(k, Target::parse(arch)).source.empty());
                ++generated;
              } catch (const Error&) { // refused, with a message naming the parameter
              }
            }
  }
  EXPECT_GT(generated, 400);
}

} // namespace
