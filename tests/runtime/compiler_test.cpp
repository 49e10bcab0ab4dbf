// NVRTC compilation: cubins for each arch, PTX on request, ptxas usage, compile errors, arch names.
#include "runtime/compiler.h"
#include "runtime/dump.h"
#include "runtime_test_support.h"
#include "support/error.h"

#include <llvm/Support/FileSystem.h>

#include <cstdlib>

namespace kiln::rt {
namespace {

using testing::kReverseSource;
using testing::kVecAddSource;
using testing::starts_with_elf_magic;

CompileRequest vec_add_request(std::string arch) {
  CompileRequest req;
  req.source = kVecAddSource;
  req.kernel_name = "vec_add";
  req.arch = std::move(arch);
  return req;
}

TEST(Nvrtc, ReportsItsVersion) {
  KILN_SKIP_WITHOUT_NVRTC();
  Nvrtc& n = nvrtc();
  EXPECT_GE(n.major, 12) << "loaded " << n.library;
  EXPECT_EQ(n.version_string(), std::to_string(n.major) + "." + std::to_string(n.minor));
}

TEST(CompileCuda, ProducesAnElfCubinForEachSupportedArch) {
  KILN_SKIP_WITHOUT_NVRTC();
  for (const char* arch : {"sm_80", "sm_90a"}) {
    CompiledKernel k = compile_cuda(vec_add_request(arch));
    EXPECT_TRUE(starts_with_elf_magic(k.cubin)) << arch;
    EXPECT_GT(k.cubin.size(), 64u) << arch;
    EXPECT_EQ(k.arch, arch);
    EXPECT_EQ(k.lowered_name, "vec_add");  // extern "C": no mangling
    EXPECT_TRUE(k.ptx.empty()) << "PTX is only produced on request";
  }
}

TEST(CompileCuda, ReportsResourceUsage) {
  KILN_SKIP_WITHOUT_NVRTC();
  CompileRequest req;
  req.source = kReverseSource;
  req.kernel_name = "reverse_blocks";
  req.arch = "sm_80";
  CompiledKernel k = compile_cuda(req);
  EXPECT_GT(k.usage.registers, 0) << "from ptxas's report or, without one, from the cubin: " << k.log;
  EXPECT_GE(k.usage.stack_frame_bytes, 0) << k.log;
  if (k.log.find("Used ") == std::string::npos)
    GTEST_SKIP() << "NVRTC served this compile without the ptxas report (it does so where a CUDA driver "
                    "caches compiles); registers checked from the cubin";
  EXPECT_EQ(k.usage.shared_bytes, 256 * 4) << k.log;
  EXPECT_EQ(k.usage.spill_store_bytes, 0) << k.log;
  EXPECT_EQ(k.usage.spill_load_bytes, 0) << k.log;
  EXPECT_GT(k.usage.constant_bytes, 0) << "kernel parameters live in cmem[0]: " << k.log;
}

TEST(CubinUsage, AgreesWithPtxasReport) {
  KILN_SKIP_WITHOUT_NVRTC();
  for (const char* arch : {"sm_80", "sm_90a"}) {
    for (auto [source, name] : {std::pair{kReverseSource, "reverse_blocks"}, std::pair{kVecAddSource, "vec_add"}}) {
      CompileRequest req;
      req.source = source;
      req.kernel_name = name;
      req.arch = arch;
      CompiledKernel k = compile_cuda(req);
      ResourceUsage from_cubin = read_cubin_usage(k.cubin, k.lowered_name);
      EXPECT_GT(from_cubin.registers, 0) << name << " " << arch;
      EXPECT_EQ(from_cubin.stack_frame_bytes, 0) << name << " " << arch;
      if (k.log.find("Used ") != std::string::npos) {
        EXPECT_EQ(from_cubin.registers, k.usage.registers) << name << " " << arch << ": " << k.log;
        EXPECT_EQ(from_cubin.stack_frame_bytes, k.usage.stack_frame_bytes) << name << " " << arch;
      }
      EXPECT_EQ(read_cubin_usage(k.cubin, "no_such_kernel").registers, -1);
    }
  }
  EXPECT_EQ(read_cubin_usage("not an elf", "vec_add").registers, -1);
  EXPECT_EQ(read_cubin_usage(std::string("\x7f" "ELF\x02\x01", 6) + std::string(100, '\xff'), "k").registers, -1)
      << "a damaged image must not be trusted or crash";
}

TEST(CompileCuda, ProducesPtxWhenAsked) {
  KILN_SKIP_WITHOUT_NVRTC();
  CompileRequest req = vec_add_request("sm_90a");
  req.want_ptx = true;
  CompiledKernel k = compile_cuda(req);
  EXPECT_TRUE(starts_with_elf_magic(k.cubin));
  EXPECT_NE(k.ptx.find(".entry vec_add"), std::string::npos) << k.ptx.substr(0, 400);
  EXPECT_NE(k.ptx.find(".target sm_90a"), std::string::npos) << k.ptx.substr(0, 400);
}

TEST(CompileCuda, FindsMangledKernelsByNameExpression) {
  KILN_SKIP_WITHOUT_NVRTC();
  CompileRequest req;
  req.source = "template <int N> __global__ void scale(float* x) { x[threadIdx.x] *= N; }\n"
               "template __global__ void scale<3>(float*);\n";
  req.kernel_name = "scale<3>";
  req.arch = "sm_80";
  CompiledKernel k = compile_cuda(req);
  EXPECT_EQ(k.lowered_name.rfind("_Z", 0), 0u) << k.lowered_name;
  EXPECT_GT(k.usage.registers, 0) << "usage must be read for the mangled name: " << k.log;
  EXPECT_GT(read_cubin_usage(k.cubin, k.lowered_name).registers, 0);
}

TEST(CompileCuda, SyntaxErrorQuotesLogAndOffendingLine) {
  KILN_SKIP_WITHOUT_NVRTC();
  CompileRequest req;
  req.kernel_name = "broken";
  req.arch = "sm_80";
  req.source = "extern \"C\" __global__ void broken(float* x) {\n"  // line 1
               "  float y = x[0];\n"                                 // line 2
               "  x[0] = y + undeclared_thing;\n"                    // line 3: the error
               "}\n";
  try {
    compile_cuda(req);
    FAIL() << "expected a compile error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("kernel 'broken'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("sm_80"), std::string::npos) << msg;
    EXPECT_NE(msg.find("broken.cu(3): error"), std::string::npos) << "the NVRTC log: " << msg;
    EXPECT_NE(msg.find("undeclared_thing\" is undefined"), std::string::npos) << msg;
    EXPECT_NE(msg.find(">     3 |   x[0] = y + undeclared_thing;"), std::string::npos) << "the quoted line: " << msg;
    EXPECT_NE(msg.find("      1 | extern"), std::string::npos) << "context above: " << msg;
  }
}

TEST(CompileCuda, FailureIsDumpedWhenDumpDirIsSet) {
  KILN_SKIP_WITHOUT_NVRTC();
  testing::ScratchDir dir;
  ::setenv("KILN_DUMP_DIR", dir.path().c_str(), 1);
  CompileRequest req;
  req.kernel_name = "broken_dump";
  req.arch = "sm_80";
  req.source = "extern \"C\" __global__ void broken_dump() { int x = ; }\n";
  std::string msg;
  try {
    compile_cuda(req);
  } catch (const Error& e) {
    msg = e.what();
  }
  ::unsetenv("KILN_DUMP_DIR");
  ASSERT_FALSE(msg.empty());
  std::string stem = dump_stem("broken_dump", {{"cu", req.source}});
  EXPECT_TRUE(llvm::sys::fs::exists(dir.path() + "/" + stem + ".cu")) << msg;
  EXPECT_TRUE(llvm::sys::fs::exists(dir.path() + "/" + stem + ".log")) << msg;
  EXPECT_NE(msg.find(stem + ".cu"), std::string::npos) << "the error names the dump: " << msg;
}

TEST(CompileCuda, RejectsBadRequests) {
  CompileRequest req = vec_add_request("sm_80");
  req.kernel_name = "";
  EXPECT_THROW(compile_cuda(req), Error);
  req = vec_add_request("sm_7");
  try {
    compile_cuda(req);
    FAIL() << "expected a bad-arch error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("unsupported target arch 'sm_7'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("sm_90a"), std::string::npos) << "lists the supported ones: " << msg;
  }
}

TEST(Arch, NamesAndValidation) {
  EXPECT_EQ(arch_for(8, 0), "sm_80");
  EXPECT_EQ(arch_for(8, 6), "sm_86");
  EXPECT_EQ(arch_for(8, 9), "sm_89");
  EXPECT_EQ(arch_for(9, 0), "sm_90a");
  for (const std::string& arch : supported_archs())
    EXPECT_NO_THROW(validate_arch(arch)) << arch;
  for (const char* bad : {"sm_7", "sm_75", "sm90", "compute_80", "", "sm_90b"})
    EXPECT_THROW(validate_arch(bad), Error) << bad;
  EXPECT_EQ(virtual_arch("sm_90a"), "compute_90a");
  EXPECT_EQ(virtual_arch("sm_86"), "compute_86");
}

TEST(PtxasUsage, ReadsOnlyTheRequestedFunction) {
  const char* log = "ptxas info    : 0 bytes gmem\n"
                    "ptxas info    : Compiling entry function 'other' for 'sm_80'\n"
                    "ptxas info    : Function properties for other\n"
                    "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
                    "ptxas info    : Used 8 registers, 360 bytes cmem[0]\n"
                    "ptxas info    : Compiling entry function 'mine' for 'sm_80'\n"
                    "ptxas info    : Function properties for mine\n"
                    "    16 bytes stack frame, 12 bytes spill stores, 20 bytes spill loads\n"
                    "ptxas info    : Used 255 registers, used 1 barriers, 49152 bytes smem, 400 bytes cmem[0], "
                    "8 bytes cmem[2]\n";
  ResourceUsage u = parse_ptxas_usage(log, "mine");
  EXPECT_EQ(u.registers, 255);
  EXPECT_EQ(u.shared_bytes, 49152);
  EXPECT_EQ(u.stack_frame_bytes, 16);
  EXPECT_EQ(u.spill_store_bytes, 12);
  EXPECT_EQ(u.spill_load_bytes, 20);
  EXPECT_EQ(u.constant_bytes, 408);
  ResourceUsage other = parse_ptxas_usage(log, "other");
  EXPECT_EQ(other.registers, 8);
  EXPECT_EQ(other.shared_bytes, 0);
  EXPECT_EQ(parse_ptxas_usage(log, "absent").registers, -1);
}

// The advisories kiln emit prints: C75xx lines but the routine C7519, trimmed, in order.
TEST(PtxasProductAdvisories, KeepsTheC75LinesButTheRoutineArrive) {
  const std::string log =
      "ptxas info    : Compiling entry function 'k' for 'sm_90a'\n"
      "ptxas info    : (C7519) warpgroup.arrive is injected in around line 10 by compiler to allow use of registers "
      "in GMMA in function 'k'\n"
      "ptxas info    : (C7517) warpgroup.wait is injected in around line 20 by compiler to allow use of registers "
      "defined by GMMA in function 'k'\n"
      "ptxas info    : Used 168 registers\n"
      "  ptxas info    : (C7514) Potential Performance Loss: wgmma.mma_async instructions are serialized  \r\n";
  const std::vector<std::string> got = ptxas_product_advisories(log);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0].rfind("ptxas info    : (C7517) warpgroup.wait is injected", 0), 0u) << got[0];
  EXPECT_EQ(got[1], "ptxas info    : (C7514) Potential Performance Loss: wgmma.mma_async instructions are serialized");
  EXPECT_TRUE(ptxas_product_advisories("ptxas info    : Used 40 registers\n").empty());
}

TEST(ResourceUsageJson, RoundTrips) {
  ResourceUsage u;
  u.registers = 40;
  u.shared_bytes = 1024;
  u.spill_store_bytes = 0;
  u.max_threads_per_block = 1024;
  EXPECT_EQ(ResourceUsage::from_json(u.to_json()), u);
  EXPECT_THROW(ResourceUsage::from_json("{not json"), Error);
}

// ptxas's register refusal (seen on an H100: a 128 x 256 matmul tile under MIN_BLOCKS_PER_SM=2) gets a sentence
// naming what caps registers; other logs get nothing. Needs no NVRTC.
TEST(CompileCuda, RegisterLimitFailuresSayWhatCapsRegisters) {
  const std::string log = "ptxas fatal   : (C7602) Insufficient registers (128) to compile instruction at line 2440 in "
                          "function matmul. Try to compile with register target of 154 or higher.\n";
  const std::string hint = register_limit_hint(log);
  EXPECT_NE(hint.find("MIN_BLOCKS_PER_SM"), std::string::npos) << hint;
  EXPECT_NE(hint.find("65536 / (threads x MIN_BLOCKS_PER_SM)"), std::string::npos) << hint;
  EXPECT_EQ(register_limit_hint("error: identifier \"undeclared_thing\" is undefined"), "");
}

} // namespace
} // namespace kiln::rt
