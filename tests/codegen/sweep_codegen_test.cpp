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
