// Every shipped kernel's generated CUDA compiles with NVRTC for sm_80 and sm_90a, uses the tensor
// core and async-copy paths where it should, and ptxas reports no spills or stack frame (a few bytes, where
// measured to pay, in the backward's dK/dV).
#include "codegen/codegen.h"
#include "kernels/builtin.h"
#include "nvrtc_compile.h"

#include <gtest/gtest.h>

#include <ostream>

using namespace kiln;

namespace {

struct Case {
  std::string kernel;
  std::map<std::string, int64_t> overrides;
  std::string label;
  // Spill bytes ptxas may report, per arch: 0 for every kernel but the backward's dK/dV (four products and two
  // resident (BLOCK_N, HEAD_DIM) accumulators a thread), where mma.sync's fragments leave sm_80 a few bytes
  // short, and the atomic variant's fifth product (whose dQ adds through a block pointer keep its 64-bit fields live
  // on sm_80: 68 bytes stored and 156 loaded, against 40 and 80 through a tensor of pointers; worklog §86).
  int64_t spill_limit_sm80 = 0, spill_limit_sm90 = 0;
};

// gtest (and so ctest's listing) prints a case by its kernel and label rather than its bytes.
void PrintTo(const Case& c, std::ostream* os) { *os << c.kernel << " " << c.label; }

std::vector<Case> cases() {
  return {
      {"vector_add", {}, "default"},
      {"softmax", {}, "default"},
      {"matmul", {}, "default"},
      {"fa2_fwd", {}, "default"},
      {"fa2_fwd", {{"CAUSAL", 1}, {"K_TRANSPOSED", 1}}, "causal_kt"},
      {"fa2_fwd", {{"HEAD_DIM", 128}, {"BLOCK_M", 128}, {"num_warps", 8}, {"num_stages", 3}}, "d128_bm128_w8_s3"},
      {"fa2_fwd", {{"DTYPE", 1}}, "bf16"},
      {"fa1_fwd", {}, "default"},
      // The backward at default_bwd_configs' tiles: five products a step (four in dK/dV, three in dQ).
      {"fa2_bwd_preprocess", {{"BLOCK_M", 64}}, "default"},
      {"fa2_bwd_dkdv", {{"BLOCK_N", 64}, {"BLOCK_M", 64}}, "d64", 16, 0},
      {"fa2_bwd_dkdv", {{"BLOCK_N", 64}, {"BLOCK_M", 64}, {"CAUSAL", 1}, {"DTYPE", 1}}, "d64_causal_bf16", 16, 0},
      {"fa2_bwd_dkdv", {{"BLOCK_N", 64}, {"BLOCK_M", 32}, {"HEAD_DIM", 128}}, "d128_bm32", 32, 0},
      {"fa2_bwd_dkdv", {{"BLOCK_N", 64}, {"BLOCK_M", 64}, {"ATOMIC_DQ", 1}}, "d64_atomic", 80, 64},
      {"fa2_bwd_dq", {{"BLOCK_M", 64}, {"BLOCK_N", 64}, {"CAUSAL", 2}}, "d64_causal"},
      {"fa2_bwd_dq", {{"BLOCK_M", 64}, {"BLOCK_N", 64}, {"HEAD_DIM", 128}}, "d128"},
      {"fa2_bwd_dq_convert", {{"BLOCK_M", 64}}, "default"},
      // Split-KV decoding (decode_split.h) at D = 128: a contiguous cache, a paged one with per-sequence key
      // counts, 64 packed rows (MQA with 16 queries), and the combine.
      {"decode_split", {}, "default"},
      {"decode_split", {{"PAGED", 1}, {"SEQLENS_K", 1}}, "paged_seqlens"},
      {"decode_split", {{"PAGED", 1}, {"SEQLENS_K", 1}, {"BLOCK_M", 64}, {"DTYPE", 1}}, "paged_bm64_bf16"},
      {"decode_combine", {}, "default"},
  };
}

class KernelsCompile : public ::testing::TestWithParam<std::tuple<Case, std::string>> {};

TEST_P(KernelsCompile, NvrtcAcceptsGeneratedCuda) {
  std::string why;
  if (!rt::nvrtc_available(&why))
    GTEST_SKIP() << "NVRTC not available: " << why;
  const auto& [c, arch] = GetParam();
  const KernelDef& def = builtin_kernels().find(c.kernel);
  Config config = def.with_overrides(def.default_config(), c.overrides);
  Kernel k = def.build(config);
  GeneratedKernel g = generate_cuda(k, Target::parse(arch));
  rt::CompiledKernel ck = rt::compile_cuda(kiln_test::compile_request_for(g, arch));
  EXPECT_FALSE(ck.cubin.empty());
  const int64_t spill_limit = arch == "sm_80" ? c.spill_limit_sm80 : c.spill_limit_sm90;
  if (ck.usage.spill_store_bytes >= 0) {
    EXPECT_LE(ck.usage.spill_store_bytes, spill_limit) << ck.log;
    EXPECT_LE(ck.usage.spill_load_bytes, 2 * spill_limit) << ck.log;
  }
  if (ck.usage.stack_frame_bytes >= 0) {
    EXPECT_LE(ck.usage.stack_frame_bytes, spill_limit) << ck.log;
  }
  std::printf("%s %s %s: %d registers, %d B dynamic shared\n%s", c.kernel.c_str(), c.label.c_str(), arch.c_str(),
              ck.usage.registers, g.shared_bytes, g.lowered.c_str());
}

std::string case_name(const ::testing::TestParamInfo<std::tuple<Case, std::string>>& info) {
  return std::get<0>(info.param).kernel + "_" + std::get<0>(info.param).label + "_" + std::get<1>(info.param);
}

INSTANTIATE_TEST_SUITE_P(All, KernelsCompile,
                         ::testing::Combine(::testing::ValuesIn(cases()), ::testing::Values("sm_80", "sm_90a")),
                         case_name);

TEST(KernelsCodegen, Fa2UsesTensorCoresAndPipelinedLoads) {
  const KernelDef& def = builtin_kernels().find("fa2_fwd");
  Config config = def.default_config();
  config.num_stages = 3;
  GeneratedKernel g = generate_cuda(def.build(config), Target::parse("sm_80"));
  EXPECT_NE(g.source.find("kiln::mma_m16n8k16_f16("), std::string::npos);
  EXPECT_NE(g.source.find("kiln::ldmatrix_x4("), std::string::npos) << "K fragments by ldmatrix";
  EXPECT_NE(g.source.find("kiln::ldmatrix_x4_trans("), std::string::npos) << "V fragments by ldmatrix.trans";
  EXPECT_NE(g.source.find("kiln::cp_async_16("), std::string::npos);
  EXPECT_NE(g.source.find("kiln::cp_async_wait<1>()"), std::string::npos) << "3 stages wait for 1 group in flight";
  EXPECT_NE(g.lowered.find("3 stage(s)"), std::string::npos) << g.lowered;
  EXPECT_NE(g.lowered.find("layout conversions through shared memory: 0"), std::string::npos) << g.lowered;
}

// On sm_90a both FA2 products are warpgroup MMAs: Q K^T with both operands read from shared memory
// through descriptors, P V with P (the softmax, packed to f16 from its f32 registers) as the register
// A operand and V read N-major. The shared tiles are fenced for the async proxy before use.
TEST(KernelsCodegen, Fa2UsesWgmmaOnHopper) {
  const KernelDef& def = builtin_kernels().find("fa2_fwd");
  for (int k_transposed : {0, 1}) {
    Config config = def.with_overrides(def.default_config(), {{"K_TRANSPOSED", k_transposed}});
    GeneratedKernel g = generate_cuda(def.build(config), Target::parse("sm_90a"));
    EXPECT_NE(g.source.find("kiln_wgmma_m64n64k16_f16_ss("), std::string::npos) << "Q K^T from shared memory";
    EXPECT_NE(g.source.find("kiln_wgmma_m64n64k16_f16_rs_tb("), std::string::npos) << "P from registers, V N-major";
    EXPECT_NE(g.source.find("kiln::pack_f16x2("), std::string::npos) << "P packed straight from f32";
    EXPECT_NE(g.source.find("kiln::fence_proxy_async();"), std::string::npos);
    EXPECT_NE(g.source.find("kiln::wgmma_wait<0>();"), std::string::npos);
    EXPECT_EQ(g.source.find("kiln::mma_m16n8k16_f16("), std::string::npos) << "no mma.sync left";
    EXPECT_NE(g.lowered.find("layout conversions through shared memory: 0"), std::string::npos) << g.lowered;
    // Q is waited for with the loop's first K/V tiles, not alone before the loop.
    EXPECT_NE(g.source.find("waited for with the first tiles of the pipelined loop"), std::string::npos);
    EXPECT_EQ(g.source.find("kiln::wgmma_wait<1>"), std::string::npos) << "softmax reads each product at once";
  }
  // The option turns it off: mma.sync fed by ldmatrix, and no proxy fences.
  CodegenOptions no_wgmma;
  no_wgmma.wgmma = false;
  GeneratedKernel g = generate_cuda(def.build(def.default_config()), Target::parse("sm_90a"), no_wgmma);
  EXPECT_NE(g.source.find("kiln::mma_m16n8k16_f16("), std::string::npos);
  EXPECT_EQ(g.source.find("wgmma"), std::string::npos);
}

// The output tiles of FA2 and matmul leave registers in the mma accumulator layout (column pairs); the store
// exchanges lane and register bits so that every thread writes 16-byte pieces (8 f16), not elements.
TEST(KernelsCodegen, AccumulatorStoresAre16ByteVectors) {
  for (const char* name : {"fa2_fwd", "matmul"}) {
    const KernelDef& def = builtin_kernels().find(name);
    for (const char* arch : {"sm_80", "sm_90a"}) {
      GeneratedKernel g = generate_cuda(def.build(def.default_config()), Target::parse(arch));
      EXPECT_NE(g.source.find("kiln::exchange_lane_bit_pair("), std::string::npos) << name << " " << arch;
      EXPECT_NE(g.source.find("kiln::st_global<16>("), std::string::npos) << name << " " << arch;
    }
    CodegenOptions scalar;
    scalar.vectorize = false;
    GeneratedKernel g = generate_cuda(def.build(def.default_config()), Target::parse("sm_90a"), scalar);
    EXPECT_EQ(g.source.find("kiln::exchange_lane_bit"), std::string::npos) << "vectorize off: element stores";
  }
}

// cp.async copies: a thread's chunks share one swizzled column, so their addresses are stepped, not
// recomputed; a matmul-style loop (nothing but copies and the wgmma chain) also gets an unchecked copy for
// tiles wholly inside the tensor, FA2 (whose loop has the softmax to do) does not.
TEST(KernelsCodegen, TileCopiesStepTheirAddresses) {
  const KernelDef& mm = builtin_kernels().find("matmul");
  GeneratedKernel g = generate_cuda(mm.build(mm.default_config()), Target::parse("sm_90a"));
  EXPECT_NE(g.source.find("const long long src_step ="), std::string::npos);
  EXPECT_NE(g.source.find("const bool ok = true;"), std::string::npos) << "unchecked copies inside the tensor";
  const KernelDef& fa2 = builtin_kernels().find("fa2_fwd");
  g = generate_cuda(fa2.build(fa2.default_config()), Target::parse("sm_90a"));
  EXPECT_NE(g.source.find("const long long src_step ="), std::string::npos);
  EXPECT_EQ(g.source.find("const bool ok = true;"), std::string::npos);
}

TEST(KernelsCodegen, MatmulUsesWgmmaOnHopper) {
  const KernelDef& def = builtin_kernels().find("matmul");
  for (int bf16 : {0, 1}) {
    Config config = def.with_overrides(def.default_config(), {{"DTYPE", bf16}});
    GeneratedKernel g = generate_cuda(def.build(config), Target::parse("sm_90a"));
    // 128 x 128 over 8 warps: two warpgroups along M, each one m64n128 per k step; B (K, N) row-major is N-major.
    EXPECT_NE(g.source.find(bf16 ? "kiln_wgmma_m64n128k16_bf16_ss_tb(" : "kiln_wgmma_m64n128k16_f16_ss_tb("),
              std::string::npos)
        << g.lowered;
    // The k loop's product chain stays in flight: loads run num_stages - 2 = 1 tile ahead (wait for 0
    // other groups), each iteration waits only for the previous product, the last after the loop.
    EXPECT_NE(g.source.find("kiln::wgmma_wait<1>(); // the previous iteration's product"), std::string::npos);
    EXPECT_NE(g.source.find("kiln::wgmma_wait<0>(); // the last product"), std::string::npos);
    EXPECT_NE(g.source.find("kiln::cp_async_wait<0>();"), std::string::npos);
  }
  // f32 (exact or tf32) keeps the older paths.
  Config f32 = def.with_overrides(def.default_config(), {{"DTYPE", 2}, {"TF32", 1}});
  EXPECT_EQ(generate_cuda(def.build(f32), Target::parse("sm_90a")).source.find("wgmma.mma_async"), std::string::npos);
}

TEST(KernelsCodegen, MatmulUsesTensorCores) {
  const KernelDef& def = builtin_kernels().find("matmul");
  GeneratedKernel g = generate_cuda(def.build(def.default_config()), Target::parse("sm_80"));
  EXPECT_NE(g.source.find("kiln::mma_m16n8k16_f16("), std::string::npos);
  EXPECT_NE(g.source.find("kiln::cp_async_16("), std::string::npos);
}

TEST(KernelsCodegen, ContiguousPointerTilesAreVectorised) {
  // vector_add's `x + offs` advances one element per register along its 16-byte groups: the loads and
  // the store become 16-byte accesses (with an element-wise path for partial or misaligned groups).
  const KernelDef& def = builtin_kernels().find("vector_add");
  GeneratedKernel g = generate_cuda(def.build(def.default_config()), Target::parse("sm_80"));
  EXPECT_NE(g.source.find("kiln::ld_global<16>("), std::string::npos);
  EXPECT_NE(g.source.find("kiln::st_global<16>("), std::string::npos);
  CodegenOptions scalar;
  scalar.vectorize = false;
  GeneratedKernel s = generate_cuda(def.build(def.default_config()), Target::parse("sm_80"), scalar);
  EXPECT_EQ(s.source.find("kiln::ld_global<16>("), std::string::npos) << "vectorize=false keeps element accesses";
}

} // namespace

// The backward's atomic dQ (a block pointer's block whose old values nothing reads) is reduced in bulk by the TMA
// unit on sm_90a and added by `red` on sm_80; neither returns old values.
TEST(KernelsCodegen, TheBackwardsAtomicDqIsReducedNotFetched) {
  const KernelDef& def = builtin_kernels().find("fa2_bwd_dkdv");
  Config config = def.with_overrides(def.default_config(), {{"BLOCK_N", 64}, {"BLOCK_M", 64}, {"ATOMIC_DQ", 1}});
  GeneratedKernel hopper = generate_cuda(def.build(config), Target::parse("sm_90a"));
  EXPECT_NE(hopper.source.find("kiln::bulk_reduce_add("), std::string::npos) << hopper.lowered;
  EXPECT_EQ(hopper.source.find("= kiln::atomic_add("), std::string::npos);
  GeneratedKernel ampere = generate_cuda(def.build(config), Target::parse("sm_80"));
  EXPECT_NE(ampere.source.find("kiln::red_add("), std::string::npos);
  EXPECT_EQ(ampere.source.find("kiln::red_add_v"), std::string::npos);
  EXPECT_EQ(ampere.source.find("kiln::bulk_reduce_add("), std::string::npos);
  EXPECT_EQ(ampere.source.find("= kiln::atomic_add("), std::string::npos);
}
