// Every shipped kernel's sm_90a renderings that issue wgmma (the configs of the generated-code hash list,
// shipped_renderings.h) compile without ptxas's product advisories (rt::ptxas_product_advisories): no product put
// in series (C7512 registers, C7514 an accumulator read in flight, C7520 a divergent path), no wait ptxas injected
// (C7517), no setmaxnreg ignored (C7508). They cost what the schedule was built to win and show nowhere else
// without a GPU: C7520 over the deterministic dK/dV's loops cost 5–25 % (worklog §91, §92), over a block mask
// 15–18 % (§47). One per kernel, so that ctest runs them side by side.
#include "codegen/codegen.h"
#include "kernels/builtin.h"
#include "nvrtc_compile.h"
#include "shipped_renderings.h"
#include "support/error.h"

#include <gtest/gtest.h>

#include <set>
#include <string>
#include <vector>

using namespace kiln;

namespace kiln_test {
namespace {

// Renderings known to draw an advisory, each with the one it draws (asserted there, so that this says when it
// goes) and why it is left.
struct KnownAdvisory {
  const char* kernel;
  const char* config_part; // a piece of Config::str() that singles the rendering out
  const char* code;        // "C7517"
};
const KnownAdvisory kKnown[] = {
    // The forward's products issued a step ahead, warp-specialised, causal, at D = 128: one wait ptxas adds.
    // PRODUCT_AHEAD is not in the tuning space (measured slower, worklog §88); worklog §91 names the rendering.
    {"fa2_fwd", "PRODUCT_AHEAD=1", "C7517"},
};

const KnownAdvisory* known_for(const std::string& kernel, const std::string& config) {
  for (const KnownAdvisory& k : kKnown)
    if (kernel == k.kernel && config.find(k.config_part) != std::string::npos)
      return &k;
  return nullptr;
}

std::vector<std::string> kernel_names() {
  std::vector<std::string> names;
  for (const KernelDef& def : builtin_kernels().all())
    names.push_back(def.name);
  return names;
}

class PtxasAdvisories : public ::testing::TestWithParam<std::string> {};

TEST_P(PtxasAdvisories, WgmmaRenderingsCompileWithoutThem) {
  std::string why;
  if (!rt::nvrtc_available(&why))
    GTEST_SKIP() << "NVRTC not available: " << why;
  const KernelDef& def = builtin_kernels().find(GetParam());
  std::set<std::string> seen;
  int compiled = 0;
  for (const Config& c : shipped_renderings(def)) {
    const std::string id = c.str();
    if (!seen.insert(id).second)
      continue;
    GeneratedKernel g;
    try {
      g = generate_cuda(def.build(c), Target::parse("sm_90a"));
    } catch (const Error&) { // refused configs are the hash list's business
      continue;
    }
    if (g.source.find("wgmma") == std::string::npos)
      continue;
    SCOPED_TRACE(def.name + " " + id);
    const rt::CompiledKernel k = rt::compile_cuda(compile_request_for(g, "sm_90a"));
    ++compiled;
    const std::vector<std::string> advisories = rt::ptxas_product_advisories(k.log);
    if (const KnownAdvisory* known = known_for(def.name, id)) {
      ASSERT_FALSE(advisories.empty()) << "the known " << known->code << " is gone: take it off kKnown\n" << k.log;
      for (const std::string& a : advisories)
        EXPECT_NE(a.find(std::string("(") + known->code + ")"), std::string::npos) << a;
    } else {
      EXPECT_TRUE(advisories.empty()) << k.log;
    }
  }
  std::printf("%s: %d sm_90a renderings with wgmma compiled\n", def.name.c_str(), compiled);
}

INSTANTIATE_TEST_SUITE_P(Shipped, PtxasAdvisories, ::testing::ValuesIn(kernel_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

} // namespace
} // namespace kiln_test
