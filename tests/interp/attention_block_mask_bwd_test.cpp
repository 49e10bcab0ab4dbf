// The attention backward over a block mask (fa2_bwd_block_mask.h) in the interpreter: for every block-mask case
// (library mask mods and their combinations: causal both alignments, windows, prefix-LM, documents with rows
// that see no key, ragged tails, N_Q != N_K, GQA, score mods and sinks beside the masks, the built-in causal
// rule), dQ, dK, dV over the block mask against the double-precision gradients with the same mods; key tiles
// in neither list never read, their dK and dV exactly 0; the kernels named after the mods and reading the
// lists. (The by-key lists are checked tile by tile against the dense mask with the forward's, in
// attention_block_mask_test.cpp.)
#include "interp/attention_block_mask_cases.h"
#include "interp/attention_mods_bwd_cases.h"

#include "dsl/dsl.h"
#include "dsl/printer.h"
#include "kernels/attention/attention_block_mask.h"
#include "kernels/attention/fa2_bwd_block_mask.h"

#include <cmath>

using namespace kiln;
using namespace kiln::testing_support;

namespace {

class BlockMaskBwdInterp : public ::testing::TestWithParam<ModCase> {};

TEST_P(BlockMaskBwdInterp, GradientsOverTheBlockMaskMatchTheReference) {
  const ModCase& c = GetParam();
  const AttentionProblem& p = c.base.problem;
  const HostBlockMask bm = make_host_block_mask(p, c.mods, c.tensors, c.base.block_m, c.base.block_n);
  check_mod_bwd_case(c, block_mask_bwd_configs(bm.layout, p), Executor::Interpreter, &bm);
}

INSTANTIATE_TEST_SUITE_P(block_mask_bwd, BlockMaskBwdInterp, ::testing::ValuesIn(block_mask_cases()),
                         [](const auto& info) { return info.param.name; });

// A mask with a hole (keys 16..63 hidden from every row): over the block mask the hole's key tiles are in no
// list, so dQ never reads their V (NaN here: a visited tile would give dP = NaN, and dS = 0 · NaN) and dK/dV's
// programs for them (which hold that V) visit no query tile: their dK and dV are exactly 0, and everything else
// is the reference's (computed on the same inputs with the hole's V zeroed: hidden keys change no gradient).
TEST(BlockMaskBwd, EmptyTilesAreNeverVisited) {
  AttentionProblem p = make_case(40, 128, 32, 0, DType::f32).problem;
  AttentionInputs in = make_inputs(p, 9, 1.0), clean = in;
  const HostBuffer dout = make_dout(p, 10, 1.0);
  for (int64_t j = 16; j < 64; ++j)
    for (int64_t d = 0; d < p.D; ++d) {
      in.v.set(j * p.D + d, std::nan(""));
      clean.v.set(j * p.D + d, 0.0);
    }
  AttentionMods mods;
  mods.mask = {MaskMod{"hole_16_64",
                       {},
                       [](const ModArgs& m) { return (m.kv_idx < 16) || (m.kv_idx >= 64); },
                       [](const ModPoint& m) { return m.kv_idx < 16 || m.kv_idx >= 64; },
                       {}}};
  const HostBlockMask bm = make_host_block_mask(p, mods, {}, 16, 16);
  for (int64_t t = 1; t < 4; ++t) {
    EXPECT_TRUE(bm.full_query_tiles(0, 0, t).empty()) << "key tile " << t;
    EXPECT_TRUE(bm.partial_query_tiles(0, 0, t).empty()) << "key tile " << t;
  }
  // Query tiles 0 and 1 are whole; tile 2 (rows 32..47) crosses N_Q = 40: partial in the by-key lists.
  EXPECT_EQ(bm.full_query_tiles(0, 0, 0), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(bm.partial_query_tiles(0, 0, 0), (std::vector<int64_t>{2}));
  // The forward keeps it full (its rows past N_Q are never stored).
  EXPECT_EQ(bm.full_tiles(0, 0, 2), (std::vector<int64_t>{0, 4, 5, 6, 7}));

  const AttentionGrads out = run_bwd_with_block_mask(p, mods, {}, bm, block_mask_bwd_configs(bm.layout, p), in, dout);
  const AttentionGrads ref = reference_backward_with_mods(p, clean, dout, mods, {});
  for (const auto& [name, cmp] : compare_grads(out, ref))
    EXPECT_TRUE(cmp.ok(1e-5)) << name << ": " << cmp.str();
  for (int64_t j = 16; j < 64; ++j)
    for (int64_t d = 0; d < p.D; ++d) {
      ASSERT_EQ(out.dk[static_cast<size_t>(j * p.D + d)], 0.0) << "dK of hidden key " << j;
      ASSERT_EQ(out.dv[static_cast<size_t>(j * p.D + d)], 0.0) << "dV of hidden key " << j;
    }
}

// The backward's kernels over a block mask are named after the mods, read the lists, and walk lists that are
// runs of tiles as ranges (the tile-by-tile loop names its starts full_/partial_start_<m|n>).
TEST(BlockMaskBwd, KernelsAreNamedAfterTheirModsAndReadTheLists) {
  AttentionMods mods;
  mods.mask = {sliding_window(8, 0)};
  mods.score = {softcap(30)};
  EXPECT_EQ(fa2_bwd_dkdv_block_mask_def(AttentionMods{}).name, "fa2_bwd_dkdv_block_mask");
  EXPECT_EQ(fa2_bwd_dq_block_mask_def(AttentionMods{}).name, "fa2_bwd_dq_block_mask");
  EXPECT_EQ(fa2_bwd_dkdv_block_mask_def(mods).name.rfind("fa2_bwd_dkdv_block_mask[softcap(30)|sliding_window(8,0)#", 0),
            0u)
      << fa2_bwd_dkdv_block_mask_def(mods).name;
  const AttentionBwdConfigs configs = default_bwd_configs(AttentionProblem{});
  const std::string dkdv = print_kernel(fa2_bwd_dkdv_block_mask_def(mods).build(configs.dkdv));
  const std::string dq = print_kernel(fa2_bwd_dq_block_mask_def(mods).build(configs.dq));
  for (const char* arg : {"bm_full_count", "bm_full_index", "bm_partial_count", "bm_partial_index"}) {
    EXPECT_NE(dkdv.find(arg), std::string::npos) << arg;
    EXPECT_NE(dq.find(arg), std::string::npos) << arg;
  }
  EXPECT_NE(dkdv.find("partial_start_m"), std::string::npos);
  EXPECT_NE(dq.find("partial_start_n"), std::string::npos);
  for (const Config& c : fa2_bwd_dkdv_block_mask_def().config_space())
    EXPECT_EQ(c.get("ATOMIC_DQ"), 0) << c.str();
}

} // namespace
