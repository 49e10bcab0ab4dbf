// Error tests of the backward over a block mask (fa2_bwd_block_mask.h): a block mask used with a backward it was
// not built for (sizes, mask mods, causal mode), configs at tiles other than the block mask's or with atomic
// dQ, in the host runner and through the host API's backward() (no GPU: every check runs before the driver is
// needed, and addresses are never dereferenced).
#include "error/attention_bwd_call.h"
#include "error/error_test_support.h"
#include "kernels/attention/attention_block_mask_api.h"
#include "kernels/attention/attention_mod_library.h"
#include "kernels/attention/fa2_bwd_block_mask.h"

#include <gtest/gtest.h>

using namespace kiln;
using kiln_test::expect_mentions;
using kiln_test::user_error;

namespace {

// The problem of valid_bwd_call(): B=2, H=4, H_KV=2, N_Q=64, N_K=80, D=64, f16.
AttentionProblem problem(int64_t nq = 64, int64_t nk = 80) {
  AttentionProblem p;
  p.B = 2, p.H = 4, p.H_KV = 2, p.N_Q = nq, p.N_K = nk, p.D = 64;
  return p;
}

AttentionMods window(int64_t left) {
  AttentionMods m;
  m.mask = {sliding_window(left, 0)};
  return m;
}

HostBlockMask host_mask(const AttentionProblem& p, const AttentionMods& mods, int64_t bm, int64_t bn) {
  HostBlockMask h;
  h.layout = block_mask_layout(p, mods, bm, bn); // the lists are not read before the checks fail
  return h;
}

AttentionBwdConfigs configs_at(const AttentionProblem& p, int64_t dkdv_m, int64_t dkdv_n, int64_t dq_m,
                               int64_t dq_n) {
  AttentionBwdConfigs c = default_bwd_configs(p);
  c.dkdv.set("BLOCK_M", dkdv_m).set("BLOCK_N", dkdv_n);
  c.dq.set("BLOCK_M", dq_m).set("BLOCK_N", dq_n);
  return c;
}

std::string host_error(const AttentionProblem& p, const AttentionMods& mods, const HostBlockMask& bm,
                       const AttentionBwdConfigs& configs) {
  return user_error([&] {
    (void)run_bwd_with_block_mask(p, mods, {}, bm, configs, make_inputs(p, 1, 1.0), make_dout(p, 2, 1.0));
  });
}

TEST(BlockMaskBwdErrors, ConfigsAtOtherTiles) {
  const AttentionProblem p = problem();
  const HostBlockMask bm = host_mask(p, window(8), 32, 16);
  expect_mentions(host_error(p, window(8), bm, configs_at(p, 16, 32, 32, 16)),
                  {"block mask built at tiles BLOCK_M=32 x BLOCK_N=16",
                   "the dK/dV config (BLOCK_N keys a program, BLOCK_M query rows a step) has BLOCK_M=16 x "
                   "BLOCK_N=32",
                   "expected the block mask's tiles"});
  expect_mentions(host_error(p, window(8), bm, configs_at(p, 32, 16, 64, 16)),
                  {"block mask built at tiles BLOCK_M=32 x BLOCK_N=16", "the dQ config", "BLOCK_M=64 x BLOCK_N=16"});
  const AttentionBwdConfigs at_its_tiles = block_mask_bwd_configs(bm.layout, p);
  EXPECT_NO_THROW(check_block_mask_bwd_configs(bm.layout, &at_its_tiles.dkdv, &at_its_tiles.dq));
}

TEST(BlockMaskBwdErrors, AtomicDq) {
  const AttentionProblem p = problem();
  const HostBlockMask bm = host_mask(p, window(8), 32, 16);
  AttentionBwdConfigs c = configs_at(p, 32, 16, 32, 16);
  c.dkdv.set("ATOMIC_DQ", 1);
  expect_mentions(host_error(p, window(8), bm, c),
                  {"fa2_bwd_dkdv_block_mask: ATOMIC_DQ=1", "expected ATOMIC_DQ=0", "ATOMIC_DQ=1"});
  expect_mentions(user_error([&] { (void)fa2_bwd_dkdv_block_mask_def().build(c.dkdv); }),
                  {"fa2_bwd_dkdv_block_mask", "expected ATOMIC_DQ=0"});
  Config varlen = configs_at(p, 32, 16, 32, 16).dq;
  varlen.set("VARLEN", 1);
  expect_mentions(user_error([&] { (void)fa2_bwd_dq_block_mask_def().build(varlen); }),
                  {"fa2_bwd_dq_block_mask", "VARLEN=1", "not built yet"});
}

TEST(BlockMaskBwdErrors, ABlockMaskForAnotherProblem) {
  const AttentionProblem p = problem();
  const AttentionBwdConfigs c = configs_at(p, 32, 16, 32, 16);
  expect_mentions(host_error(p, window(8), host_mask(problem(64, 90), window(8), 32, 16), c),
                  {"block mask built for B2 H4 H_KV2 N_Q64 N_K90", "the attention has B2 H4 H_KV2 N_Q64 N_K80"});
  expect_mentions(host_error(p, window(16), host_mask(p, window(8), 32, 16), c),
                  {"built for the mask mods [sliding_window(8,0)]",
                   "the attention has mask mods [sliding_window(16,0)]"});
  AttentionProblem causal = p;
  causal.causal = 1;
  expect_mentions(host_error(p, {}, host_mask(causal, {}, 32, 16), c),
                  {"block mask built with causal top-left", "the attention has causal none"});
}

// ---- the host API's backward() ----

// valid_bwd_call() with a sliding window and a block mask built for it at 64 x 32.
kiln_test::BwdCall call_with_block_mask() {
  kiln_test::BwdCall c = kiln_test::valid_bwd_call();
  c.options.mods = window(8);
  auto bm = std::make_shared<attention::BlockMask>(); // no device memory: never read by the checks
  bm->layout = block_mask_layout(problem(), c.options.mods, 64, 32);
  c.options.block_mask = bm;
  return c;
}

std::string api_error(const kiln_test::BwdCall& c) {
  return user_error([&] {
    (void)attention::validate_attention_bwd_args(c.q, c.k, c.v, c.o, c.lse, c.dout, c.dq, c.dk, c.dv, c.options);
  });
}

TEST(BlockMaskBwdApiErrors, AValidCallPasses) {
  kiln_test::BwdCall c = call_with_block_mask();
  EXPECT_NO_THROW((void)attention::validate_attention_bwd_args(c.q, c.k, c.v, c.o, c.lse, c.dout, c.dq, c.dk,
                                                               c.dv, c.options));
  // Configs at the block mask's tiles pass; no accumulator is needed (the deterministic pair always runs).
  const AttentionBwdConfigs configs = block_mask_bwd_configs(c.options.block_mask->layout, problem());
  c.options.config = configs.dkdv;
  c.options.dq_config = configs.dq;
  EXPECT_NO_THROW((void)attention::validate_attention_bwd_args(c.q, c.k, c.v, c.o, c.lse, c.dout, c.dq, c.dk,
                                                               c.dv, c.options));
  c.options.config.reset(), c.options.dq_config.reset();
  c.options.deterministic = false;
  EXPECT_EQ(attention::backward_workspace_bytes(c.q, c.options), uint64_t{2 * 4 * 64 * 4});
}

TEST(BlockMaskBwdApiErrors, ConfigsAtOtherTilesOrWithAtomicDq) {
  kiln_test::BwdCall c = call_with_block_mask();
  c.options.config = configs_at(problem(), 64, 64, 64, 32).dkdv;
  expect_mentions(api_error(c), {"attention::backward: options.block_mask:",
                                 "block mask built at tiles BLOCK_M=64 x BLOCK_N=32", "the dK/dV config",
                                 "BLOCK_M=64 x BLOCK_N=64"});
  c = call_with_block_mask();
  c.options.dq_config = configs_at(problem(), 64, 32, 32, 32).dq;
  expect_mentions(api_error(c), {"options.block_mask:", "the dQ config", "BLOCK_M=32 x BLOCK_N=32"});
  c = call_with_block_mask();
  c.options.deterministic = false;
  c.options.config = configs_at(problem(), 64, 32, 64, 32).dkdv.set("ATOMIC_DQ", 1);
  expect_mentions(api_error(c), {"options.block_mask:", "ATOMIC_DQ=1", "expected ATOMIC_DQ=0"});
}

TEST(BlockMaskBwdApiErrors, ABlockMaskForAnotherCall) {
  kiln_test::BwdCall c = call_with_block_mask();
  c.options.mods = window(4);
  expect_mentions(api_error(c), {"attention::backward: options.block_mask:", "[sliding_window(8,0)]",
                                 "[sliding_window(4,0)]"});
  c = call_with_block_mask();
  c.options.causal = attention::Causal::BottomRight;
  expect_mentions(api_error(c), {"built with causal none", "the attention has causal bottom-right"});
  c = kiln_test::valid_bwd_call(48);
  c.options.mods = window(8);
  c.options.block_mask = call_with_block_mask().options.block_mask;
  expect_mentions(api_error(c), {"built for B2 H4 H_KV2 N_Q64 N_K80", "the attention has B2 H4 H_KV2 N_Q48 N_K80"});
}

} // namespace
