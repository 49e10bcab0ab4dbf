// Error tests of block masks (attention_block_mask.h): a block mask used with a forward it was not built for
// (tiles, sizes, causal mode, mask mods), bad tiles, configs the forward over a block mask does not run, and
// the host API's checks of options.block_mask and of make_block_mask's arguments (no GPU: addresses are never
// dereferenced, and every check runs before the driver is needed).
#include "error/error_test_support.h"
#include "kernels/attention/attention_block_mask.h"
#include "kernels/attention/attention_block_mask_api.h"
#include "kernels/attention/attention_mod_library.h"
#include "kernels/attention/fa2_fwd.h"

#include <gtest/gtest.h>

using namespace kiln;
using kiln_test::expect_mentions;
using kiln_test::user_error;

namespace {

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

std::string run_error(const AttentionProblem& p, const AttentionMods& mods, const HostBlockMask& bm,
                      const Config& config) {
  return user_error([&] { (void)run_fa2_with_block_mask(p, mods, {}, bm, config, make_inputs(p, 1, 1.0)); });
}

Config config_at(const AttentionProblem& p, int64_t bm, int64_t bn) {
  Config c = default_fa2_config(p);
  c.set("BLOCK_M", bm).set("BLOCK_N", bn);
  return c;
}

TEST(BlockMaskErrors, TilesOtherThanTheKernels) {
  const AttentionProblem p = problem();
  expect_mentions(run_error(p, window(8), host_mask(p, window(8), 32, 16), config_at(p, 32, 32)),
                  {"block mask built at tiles BLOCK_M=32 x BLOCK_N=16", "config has BLOCK_M=32 x BLOCK_N=32",
                   "expected the block mask's tiles"});
  expect_mentions(run_error(p, window(8), host_mask(p, window(8), 64, 16), config_at(p, 16, 16)),
                  {"BLOCK_M=64 x BLOCK_N=16", "BLOCK_M=16 x BLOCK_N=16"});
}

TEST(BlockMaskErrors, OtherSizes) {
  const AttentionProblem p = problem(), other = problem(64, 90);
  expect_mentions(
      run_error(p, window(8), host_mask(other, window(8), 16, 16), config_at(p, 16, 16)),
      {"block mask built for B2 H4 H_KV2 N_Q64 N_K90", "the attention has B2 H4 H_KV2 N_Q64 N_K80"});
}

TEST(BlockMaskErrors, OtherCausalMode) {
  AttentionProblem p = problem(), causal = problem();
  causal.causal = 2;
  expect_mentions(run_error(p, {}, host_mask(causal, {}, 16, 16), config_at(p, 16, 16)),
                  {"block mask built with causal bottom-right", "the attention has causal none"});
}

TEST(BlockMaskErrors, OtherMaskMods) {
  const AttentionProblem p = problem();
  expect_mentions(run_error(p, window(16), host_mask(p, window(8), 16, 16), config_at(p, 16, 16)),
                  {"built for the mask mods [sliding_window(8,0)]",
                   "the attention has mask mods [sliding_window(16,0)]"});
  expect_mentions(run_error(p, AttentionMods{}, host_mask(p, window(8), 16, 16), config_at(p, 16, 16)),
                  {"[sliding_window(8,0)]", "the attention has mask mods [] (none)"});
  // Score mods do not change which keys are seen: a block mask of the mask mods alone serves them.
  AttentionMods with_score = window(8);
  with_score.score = {softcap(30)};
  EXPECT_NO_THROW(check_block_mask(host_mask(p, window(8), 16, 16).layout, p, with_score));
}

TEST(BlockMaskErrors, TilesThatAreNotForwardTiles) {
  const AttentionProblem p = problem();
  expect_mentions(user_error([&] { (void)block_mask_layout(p, {}, 24, 16); }),
                  {"block_m = 24", "expected a power of two in [16, 256]"});
  expect_mentions(user_error([&] { (void)make_host_block_mask(p, {}, {}, 16, 512); }), {"block_n = 512"});
}

TEST(BlockMaskErrors, AMaskModTensorMissing) {
  AttentionMods docs;
  docs.mask = {document_mask()};
  expect_mentions(user_error([&] { (void)make_host_block_mask(problem(), docs, {}, 16, 16); }),
                  {"read a tensor 'q_doc'", "not given"});
}

TEST(BlockMaskErrors, ConfigsTheForwardOverABlockMaskDoesNotRun) {
  const AttentionProblem p = problem();
  for (const char* param : {"WARP_SPECIALIZE", "PINGPONG", "PRODUCT_AHEAD"}) {
    Config c = config_at(p, 64, 64);
    c.set(param, 1);
    expect_mentions(
        user_error([&] { (void)fa2_fwd_block_mask_def().build(c); }),
        {"fa2_fwd_block_mask", "WARP_SPECIALIZE, PINGPONG, PRODUCT_AHEAD and LAST_PRODUCT_LATE", "expected all four 0"});
  }
  // The kernel that walks only runs takes them (its loops are key ranges) ...
  Config ws = config_at(p, 64, 64);
  ws.set("WARP_SPECIALIZE", 1).set("BLOCK_MASK_RUNS", 1);
  EXPECT_NO_THROW((void)fa2_fwd_block_mask_def().build(ws));
  // ... but only over a block mask whose lists are all runs (host_mask's says they are not: runs is false).
  const HostBlockMask gaps = host_mask(p, window(8), 16, 16);
  ASSERT_FALSE(gaps.runs);
  Config runs = config_at(p, 16, 16);
  runs.set("BLOCK_MASK_RUNS", 1);
  expect_mentions(run_error(p, window(8), gaps, runs),
                  {"BLOCK_MASK_RUNS=1", "not one run", "expected BLOCK_MASK_RUNS=0"});
  Config varlen = config_at(p, 64, 64);
  varlen.set("VARLEN", 1);
  expect_mentions(user_error([&] { (void)build_fa2_fwd_with_block_mask(varlen, AttentionMods{}); }),
                  {"VARLEN=1", "not built yet"});
}

// ---- the host API ----

struct Call {
  attention::TensorRef q, k, v, o;
  std::optional<attention::TensorRef> lse;
  attention::AttentionOptions options;
};

// B=2, H=4, H_KV=2, N_Q=64, N_K=80, D=64, f16, with a sliding window and a block mask built for it at 64
// x 32.
Call valid_call() {
  using attention::TensorRef;
  Call c;
  c.q = TensorRef::contiguous(0x10000000, DType::f16, {2, 4, 64, 64});
  c.k = TensorRef::contiguous(0x20000000, DType::f16, {2, 2, 80, 64});
  c.v = TensorRef::contiguous(0x30000000, DType::f16, {2, 2, 80, 64});
  c.o = TensorRef::contiguous(0x40000000, DType::f16, {2, 4, 64, 64});
  c.lse = TensorRef::contiguous(0x50000000, DType::f32, {2, 4, 64});
  c.options.mods = window(8);
  auto bm = std::make_shared<attention::BlockMask>(); // no device memory: never read by the checks
  bm->layout = block_mask_layout(problem(), c.options.mods, 64, 32);
  c.options.block_mask = bm;
  return c;
}

std::string api_error(const Call& c) {
  return user_error([&] { (void)attention::validate_attention_args(c.q, c.k, c.v, c.o, c.lse, c.options); });
}

TEST(BlockMaskApiErrors, AValidCallPassesWithTheListsAsArguments) {
  const Call c = valid_call();
  const attention::ValidatedAttention v =
      attention::validate_attention_args(c.q, c.k, c.v, c.o, c.lse, c.options);
  EXPECT_EQ(v.block_mask.size(), 4u);
  EXPECT_EQ(attention::block_mask_default_config(*c.options.block_mask, v.problem).get("BLOCK_N"), 32);
}

TEST(BlockMaskApiErrors, ABlockMaskForAnotherCall) {
  Call c = valid_call();
  c.options.mods = window(4);
  expect_mentions(api_error(c), {"attention::forward: options.block_mask:", "[sliding_window(8,0)]",
                                 "[sliding_window(4,0)]"});

  c = valid_call();
  c.options.causal = attention::Causal::TopLeft;
  expect_mentions(api_error(c), {"built with causal none", "the attention has causal top-left"});

  c = valid_call();
  c.options.config = default_fa2_config(problem());
  c.options.config->set("BLOCK_M", 128).set("BLOCK_N", 64);
  expect_mentions(api_error(c), {"tiles BLOCK_M=64 x BLOCK_N=32", "config has BLOCK_M=128 x BLOCK_N=64"});
  c.options.config->set("BLOCK_M", 64).set("BLOCK_N", 32).set("WARP_SPECIALIZE", 1);
  expect_mentions(api_error(c),
                  {"attention::forward: options.block_mask:", "WARP_SPECIALIZE", "expected all four 0"});
  c.options.config->set("WARP_SPECIALIZE", 0).set("BLOCK_MASK_RUNS", 1); // valid_call's block mask: runs false
  expect_mentions(api_error(c), {"options.block_mask:", "BLOCK_MASK_RUNS=1", "not one run"});

  c = valid_call();
  c.q = attention::TensorRef::contiguous(0x10000000, DType::f16, {2, 4, 48, 64});
  c.o = attention::TensorRef::contiguous(0x40000000, DType::f16, {2, 4, 48, 64});
  c.lse = attention::TensorRef::contiguous(0x50000000, DType::f32, {2, 4, 48});
  expect_mentions(api_error(c),
                  {"built for B2 H4 H_KV2 N_Q64 N_K80", "the attention has B2 H4 H_KV2 N_Q48 N_K80"});
}

TEST(BlockMaskApiErrors, EntryPointsThatTakeNoBlockMask) {
  const Call c = valid_call();
  Call fa1 = c; // no mods (fa1_forward refuses those first)
  fa1.options.mods = {};
  auto no_mods = std::make_shared<attention::BlockMask>();
  no_mods->layout = block_mask_layout(problem(), {}, 64, 32);
  fa1.options.block_mask = no_mods;
  expect_mentions(
      user_error([&] { attention::fa1_forward(fa1.q, fa1.k, fa1.v, fa1.o, fa1.lse, fa1.options); }),
      {"options.block_mask is not supported by fa1_forward"});
  // backward() takes one: attention_block_mask_bwd_errors_test.cpp.
}

TEST(BlockMaskApiErrors, MakeBlockMaskChecksItsArguments) {
  attention::AttentionOptions o;
  o.mods.mask = {document_mask()};
  o.mod_tensors = {{"q_doc", attention::TensorRef::contiguous(0x61000000, DType::i32, {2, 64})},
                   {"kv_doc", attention::TensorRef::contiguous(0x62000000, DType::i32, {2, 80})}};
  const attention::BlockMaskSizes sizes{2, 4, 2, 64, 80};
  const attention::ValidatedBlockMask v = attention::validate_block_mask_args(sizes, o, 64, 32);
  EXPECT_EQ(v.mask_tensors.size(), 2u);
  EXPECT_EQ(v.layout.k_tiles(), 3);

  auto error = [&](const attention::BlockMaskSizes& s, const attention::AttentionOptions& opts, int64_t bm,
                   int64_t bn) {
    return user_error([&] { (void)attention::validate_block_mask_args(s, opts, bm, bn); });
  };
  expect_mentions(error({2, 4, 2, 64, 0}, o, 64, 32), {"attention::make_block_mask:", "sizes.N_K is 0"});
  expect_mentions(error(sizes, o, 48, 32), {"block_m = 48", "power of two"});
  expect_mentions(error({2, 3, 2, 64, 80}, o, 64, 32), {"H=3 must be a multiple of H_KV=2"});
  attention::AttentionOptions missing = o;
  missing.mod_tensors.erase("kv_doc");
  expect_mentions(error(sizes, missing, 64, 32), {"read a tensor 'kv_doc'"});
  attention::AttentionOptions wrong_shape = o;
  wrong_shape.mod_tensors["q_doc"] = attention::TensorRef::contiguous(0x61000000, DType::i32, {2, 65});
  expect_mentions(error(sizes, wrong_shape, 64, 32), {"mod tensor 'q_doc'", "65"});
  attention::AttentionOptions nested = o;
  nested.block_mask = std::make_shared<attention::BlockMask>();
  expect_mentions(error(sizes, nested, 64, 32), {"options.block_mask is set"});
}

} // namespace
