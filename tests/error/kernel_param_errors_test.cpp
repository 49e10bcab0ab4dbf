// Kernel parameters outside their declared kinds and ranges, and configs the target arch cannot run: refused
// before any work (KernelDef::check, generate_cuda's target limits), each error naming the kernel, the
// parameter, what it takes and what came.
#include "codegen/codegen.h"
#include "error/error_test_support.h"
#include "kernels/attention/attention_api.h"
#include "kernels/attention/attention_problem.h"
#include "kernels/attention/fa2_fwd.h"
#include "kernels/builtin.h"
#include "kernels/matmul/matmul.h"

#include <gtest/gtest.h>

using namespace kiln;
using kiln_test::expect_mentions;
using kiln_test::user_error;

namespace {

std::string override_error(const char* kernel, const std::map<std::string, int64_t>& overrides) {
  const KernelDef& def = builtin_kernels().find(kernel);
  return user_error([&] { (void)def.with_overrides(def.default_config(), overrides); });
}

} // namespace

TEST(KernelParamErrors, TileOfZeroIsRefusedBeforeTheGridDividesByIt) {
  expect_mentions(override_error("fa2_fwd", {{"BLOCK_M", 0}}),
                  {"kernel 'fa2_fwd'", "BLOCK_M=0 is not allowed", "a power of two from 16 to 256"});
  expect_mentions(override_error("vector_add", {{"BLOCK", 0}}),
                  {"BLOCK=0", "a power of two from 1 to 65536"});
}

TEST(KernelParamErrors, TileBeyondItsRangeIsRefusedWithoutBuildingIt) {
  expect_mentions(override_error("fa2_fwd", {{"BLOCK_M", 1048576}}), {"BLOCK_M=1048576", "from 16 to 256"});
  expect_mentions(override_error("matmul", {{"BLOCK_K", 48}}), {"BLOCK_K=48", "a power of two"});
}

TEST(KernelParamErrors, FlagsTakeOnlyZeroOrOne) {
  expect_mentions(override_error("fa2_fwd", {{"MASK_EVERY_TILE", 5}}), {"MASK_EVERY_TILE=5", "0 or 1"});
  expect_mentions(override_error("fa2_fwd", {{"EVEN_D", -1}}), {"EVEN_D=-1", "0 or 1"});
  expect_mentions(override_error("matmul", {{"A_COL_MAJOR", 2}}), {"A_COL_MAJOR=2", "0 or 1"});
  expect_mentions(override_error("fa2_bwd_dkdv", {{"ATOMIC_DQ", 3}}), {"ATOMIC_DQ=3", "0 or 1"});
}

TEST(KernelParamErrors, ChoicesNameTheirCodes) {
  expect_mentions(override_error("fa2_fwd", {{"CAUSAL", 3}}), {"CAUSAL=3", "codes 0 to 2", "bottom-right"});
  expect_mentions(override_error("softmax", {{"DTYPE", 7}}), {"DTYPE=7", "codes 0 to 2", "bf16"});
}

TEST(KernelParamErrors, MinBlocksPerSmWithinWhatAnSmHolds) {
  expect_mentions(override_error("fa2_fwd", {{"MIN_BLOCKS_PER_SM", -3}}),
                  {"MIN_BLOCKS_PER_SM=-3", "an integer from 1 to 32"});
  expect_mentions(override_error("matmul", {{"MIN_BLOCKS_PER_SM", 0}}), {"MIN_BLOCKS_PER_SM=0"});
}

TEST(KernelParamErrors, HeadDimBeyondTheWidestTileTheKernelsSupport) {
  expect_mentions(override_error("fa2_fwd", {{"HEAD_DIM", 512}}), {"HEAD_DIM=512", "from 16 to 256"});
}

TEST(KernelParamErrors, WarpsAndStagesAreCheckedInEveryConfig) {
  const KernelDef& def = fa2_fwd_def();
  Config c = def.default_config();
  c.num_warps = 3;
  expect_mentions(user_error([&] { def.check(c); }), {"num_warps=3", "a power of two from 1 to 32"});
  c.num_warps = 4;
  c.num_stages = 0;
  expect_mentions(user_error([&] { def.check(c); }), {"num_stages=0", "an integer from 1 to 8"});
}

TEST(KernelParamErrors, AttentionConfigOfTheHostApiIsChecked) {
  AttentionProblem p;
  p.B = 1, p.H = 1, p.H_KV = 1, p.N_Q = 16, p.N_K = 16, p.D = 16;
  Config c = default_fa2_config(p);
  c.set("BLOCK_N", 0);
  expect_mentions(user_error([&] { check_attention_config(p, c); }), {"BLOCK_N=0", "a power of two"});
}

TEST(KernelParamErrors, TilesNeedingMoreSharedMemoryThanTheArchHasAreRefusedBeforeEmitting) {
  // f32 tiles of 256 x 256 with a 256-wide head and a three-deep ring: far past any arch's per-block limit.
  const KernelDef& def = fa2_fwd_def();
  Config c = def.with_overrides(
      def.default_config(),
      {{"BLOCK_M", 256}, {"BLOCK_N", 256}, {"HEAD_DIM", 256}, {"DTYPE", 2}, {"num_stages", 3}});
  const Kernel k = def.build(c);
  for (const char* arch : {"sm_80", "sm_86", "sm_90a"}) {
    try {
      (void)generate_cuda(k, Target::parse(arch));
      ADD_FAILURE() << "expected a TargetLimitError for " << arch;
    } catch (const TargetLimitError& e) {
      expect_mentions(e.what(),
                      {"kernel 'fa2_fwd'", "BLOCK_M=256", "bytes of shared memory", arch, "per block"});
    }
  }
}

TEST(KernelParamErrors, MinBlocksPerSmBeyondTheArchsResidentThreadsIsRefused) {
  const KernelDef& def = matmul_def();
  const Config c = def.with_overrides(def.default_config(), {{"MIN_BLOCKS_PER_SM", 16}, {"num_warps", 8}});
  const Kernel k = def.build(c);
  try {
    (void)generate_cuda(k, Target::parse("sm_90a"));
    ADD_FAILURE() << "expected a TargetLimitError";
  } catch (const TargetLimitError& e) {
    expect_mentions(e.what(), {"MIN_BLOCKS_PER_SM=16", "16 resident CTAs of 256 threads", "2048 threads"});
  }
}
