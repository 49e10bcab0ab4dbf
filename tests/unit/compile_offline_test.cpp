// compile_offline (jit/compile_offline.h, through kiln/kiln.h): PTX, cubin and ptxas's resource usage for a
// user's kernel and kiln's, for several arches, with NVRTC alone; and the errors it gives before NVRTC is
// asked (an arch kiln does not target, a config the arch cannot hold). Tests that compile skip, saying why,
// where NVRTC is absent; no test here needs a GPU or a driver.
#include <kiln/kiln.h>

#include "kernels/builtin.h"
#include "runtime/nvrtc.h"

#include <gtest/gtest.h>

#include <string>

using namespace kiln;

namespace {

// A user's kernel, written with kiln/kiln.h alone: y = a * x + y in f16, f32 arithmetic.
Kernel half_axpy(int64_t block) {
  KernelBuilder kb("half_axpy", Config().set("BLOCK", block));
  Value x = kb.arg_ptr("x", f16), y = kb.arg_ptr("y", f16), a = kb.arg("a", f32), n = kb.arg("n", i32);
  Value offs = program_id(0) * block + arange(0, block); // (BLOCK,) i32
  Value mask = offs < n;
  Value axpy = a * load(x + offs, mask, 0.0f).to(f32) + load(y + offs, mask, 0.0f).to(f32); // (BLOCK,) f32
  store(y + offs, axpy.to(f16), mask);
  return kb.finish();
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a kiln::Error";
  return "";
}

#define SKIP_WITHOUT_NVRTC()                                                                                 \
  do {                                                                                                       \
    std::string why;                                                                                         \
    if (!rt::nvrtc_available(&why))                                                                          \
      GTEST_SKIP() << "NVRTC not available: " << why;                                                        \
  } while (0)

class CompileOffline : public ::testing::TestWithParam<std::string> {};

TEST_P(CompileOffline, AUsersKernelGivesPtxCubinAndResourceUsage) {
  SKIP_WITHOUT_NVRTC();
  const std::string arch = GetParam();
  const KernelArtifacts a = compile_offline(half_axpy(1024), arch);
  EXPECT_EQ(a.generated.name, "half_axpy");
  EXPECT_EQ(a.generated.threads, 128); // num_warps 4
  EXPECT_NE(a.generated.source.find("__global__"), std::string::npos);
  EXPECT_EQ(a.compiled.arch, arch);
  EXPECT_NE(a.compiled.ptx.find(".entry " + a.compiled.lowered_name), std::string::npos) << a.compiled.ptx;
  EXPECT_NE(a.compiled.ptx.find(".target " + arch), std::string::npos);
  ASSERT_GE(a.compiled.cubin.size(), 4u);
  EXPECT_EQ(a.compiled.cubin.substr(0, 4), std::string("\177ELF"));
  const ResourceUsage& u = a.compiled.usage;
  EXPECT_GT(u.registers, 0) << a.compiled.log;
  EXPECT_LE(u.registers, 255);
  if (u.spill_store_bytes >= 0) { // reported by ptxas -v unless NVRTC served the compile from a driver cache
    EXPECT_EQ(u.spill_store_bytes, 0) << a.compiled.log;
    EXPECT_EQ(u.spill_load_bytes, 0) << a.compiled.log;
  }
  const std::string line = a.usage_summary();
  EXPECT_EQ(
      line.rfind("half_axpy on " + arch + ": registers " + std::to_string(u.registers) + " per thread", 0),
      0u)
      << line;
  EXPECT_NE(line.find("dynamic shared 0 bytes"), std::string::npos) << line;
}

INSTANTIATE_TEST_SUITE_P(Arches, CompileOffline, ::testing::Values("sm_80", "sm_89", "sm_90a"));

// kiln's own matmul, from its KernelDef and a config: tiles in shared memory (dynamic), tensor cores.
TEST(CompileOfflineOf, ARegisteredKernelAtAConfigReportsItsSharedMemory) {
  SKIP_WITHOUT_NVRTC();
  const KernelDef& def = builtin_kernels().find("matmul");
  const Config config =
      def.with_overrides(def.default_config(), {{"BLOCK_M", 64}, {"BLOCK_N", 64}, {"DTYPE", 0}});
  const KernelArtifacts a = compile_offline(def.build(config), "sm_80");
  EXPECT_GT(a.generated.shared_bytes, 0);
  EXPECT_NE(a.compiled.ptx.find("mma.sync"), std::string::npos);
  EXPECT_NE(a.usage_summary().find("dynamic shared " + std::to_string(a.generated.shared_bytes) + " bytes"),
            std::string::npos);
  // Code-generator switches act as they do for the JIT: without tensor cores there is no mma.
  CodegenOptions fma;
  fma.tensor_cores = false;
  fma.wgmma = false;
  EXPECT_EQ(compile_offline(def.build(config), "sm_80", fma).compiled.ptx.find("mma.sync"),
            std::string::npos);
}

// Checked before NVRTC is looked for: these hold with or without it.
TEST(CompileOfflineErrors, AnArchKilnDoesNotTargetIsNamedWithTheOnesItDoes) {
  const std::string msg = error_of([] { (void)compile_offline(half_axpy(256), "sm_70"); });
  EXPECT_NE(msg.find("'sm_70'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("sm_80, sm_86, sm_89, sm_90, sm_90a"), std::string::npos) << msg;
}

TEST(CompileOfflineErrors, AConfigBeyondTheArchsSharedMemoryIsATargetLimitError) {
  const KernelDef& def = builtin_kernels().find("matmul");
  const Config big = def.with_overrides(
      def.default_config(), {{"BLOCK_M", 256}, {"BLOCK_N", 256}, {"BLOCK_K", 128}, {"num_stages", 4}});
  try {
    (void)compile_offline(def.build(big), "sm_86");
    ADD_FAILURE() << "expected a TargetLimitError";
  } catch (const TargetLimitError& e) {
    EXPECT_NE(std::string(e.what()).find("sm_86"), std::string::npos) << e.what();
  }
}

} // namespace
