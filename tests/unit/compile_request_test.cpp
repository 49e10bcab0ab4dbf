// compile_request (jit/compile_request.h): the NVRTC request every generated kernel is compiled with, and the
// options it adds to rt::nvrtc_options' (-minimal from NVRTC 12.4 on). -minimal must only make NVRTC faster:
// the PTX and cubin of a generated kernel are compared byte for byte with and without it, so that a change
// of NVRTC that made it alter code would fail here, on the CPU. Tests that compile skip, saying why, where
// NVRTC is absent.
#include "jit/compile_request.h"

#include "kernels/builtin.h"
#include "runtime/nvrtc.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <string>
#include <vector>

using namespace kiln;

namespace {

TEST(GeneratedKernelOptions, MinimalFromNvrtc12_4On) {
  const std::vector<std::string> none, minimal = {"-minimal"};
  EXPECT_EQ(generated_kernel_options(11, 8), none);
  EXPECT_EQ(generated_kernel_options(12, 0), none);
  EXPECT_EQ(generated_kernel_options(12, 3), none); // NVRTC 12.0-12.3 reject the option
  EXPECT_EQ(generated_kernel_options(12, 4), minimal);
  EXPECT_EQ(generated_kernel_options(12, 9), minimal);
  EXPECT_EQ(generated_kernel_options(13, 0), minimal);
}

GeneratedKernel generated(const std::string& kernel, const std::map<std::string, int64_t>& sets,
                          const std::string& arch) {
  const KernelDef& def = builtin_kernels().find(kernel);
  return generate_cuda(def.build(def.with_overrides(def.default_config(), sets)), Target::parse(arch));
}

TEST(CompileRequest, NamesTheGeneratedKernelAndCarriesTheLoadedNvrtcsOptions) {
  std::string why;
  if (!rt::nvrtc_available(&why))
    GTEST_SKIP() << "NVRTC not available: " << why;
  const GeneratedKernel g = generated("softmax", {}, "sm_80");
  const rt::CompileRequest req = compile_request(g, "sm_80");
  EXPECT_EQ(req.source, g.source);
  EXPECT_EQ(req.kernel_name, "softmax");
  EXPECT_EQ(req.arch, "sm_80");
  const rt::Nvrtc& n = rt::nvrtc();
  EXPECT_EQ(req.options, generated_kernel_options(n.major, n.minor)) << "NVRTC " << n.version_string();
  // kiln's own options come first, then the request's: -minimal is part of the compile cache's key.
  const std::vector<std::string> all = rt::nvrtc_options(req);
  for (const std::string& o : req.options)
    EXPECT_NE(std::find(all.begin(), all.end(), o), all.end()) << o;
}

struct Case {
  std::string kernel;
  std::map<std::string, int64_t> sets;
  std::string arch;
};

class MinimalChangesNoCode : public ::testing::TestWithParam<Case> {};

TEST_P(MinimalChangesNoCode, SamePtxAndCubinAsWithoutIt) {
  std::string why;
  if (!rt::nvrtc_available(&why))
    GTEST_SKIP() << "NVRTC not available: " << why;
  const rt::Nvrtc& n = rt::nvrtc();
  if (generated_kernel_options(n.major, n.minor).empty())
    GTEST_SKIP() << "NVRTC " << n.version_string() << " has no -minimal";
  const Case& c = GetParam();
  rt::CompileRequest with = compile_request(generated(c.kernel, c.sets, c.arch), c.arch);
  ASSERT_EQ(with.options, std::vector<std::string>{"-minimal"});
  with.want_ptx = true;
  rt::CompileRequest without = with;
  without.options.clear();
  const rt::CompiledKernel a = rt::compile_cuda(with), b = rt::compile_cuda(without);
  EXPECT_FALSE(a.cubin.empty());
  EXPECT_EQ(a.ptx, b.ptx) << c.kernel << " on " << c.arch;
  EXPECT_TRUE(a.cubin == b.cubin) << c.kernel << " on " << c.arch << ": the cubins differ (" << a.cubin.size()
                                  << " and " << b.cubin.size() << " bytes)";
  EXPECT_EQ(a.usage, b.usage);
}

// A reduction with warp shuffles on sm_80, and on sm_90a a matmul with wgmma, TMA and the warp-specialised
// producer, so that each prelude part is compiled both ways (small tiles keep the compiles short).
INSTANTIATE_TEST_SUITE_P(
    Kernels, MinimalChangesNoCode,
    ::testing::Values(Case{"softmax", {}, "sm_80"},
                      Case{"matmul",
                           {{"BLOCK_M", 128}, {"BLOCK_N", 64}, {"BLOCK_K", 64}, {"WARP_SPECIALIZE", 1},
                            {"MIN_BLOCKS_PER_SM", 1}},
                           "sm_90a"}),
    [](const ::testing::TestParamInfo<Case>& info) { return info.param.kernel + "_" + info.param.arch; });

} // namespace
