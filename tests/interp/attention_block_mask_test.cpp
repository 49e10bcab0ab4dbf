// Block masks (attention_block_mask.h) in the interpreter: the classifier kernel's lists checked tile by tile
// against the dense mask for every case (library mask mods, combinations, tails, rows that see no key, both
// causal alignments, the built-in causal rule), at the case's tiles and at others; the forward over a block
// mask against the double reference with the same mods and against the forward without one; key tiles in
// neither list never read; causal as a mod visiting exactly the built-in causal path's tiles.
#include "interp/attention_block_mask_cases.h"

#include "dsl/dsl.h"
#include "dsl/printer.h"
#include "kernels/attention/attention_block_mask.h"

using namespace kiln;
using namespace kiln::testing_support;

namespace {

class BlockMaskInterp : public ::testing::TestWithParam<ModCase> {};

TEST_P(BlockMaskInterp, ListsMatchTheDenseMaskTileByTile) {
  const ModCase& c = GetParam();
  const AttentionProblem& p = c.base.problem;
  const std::pair<int64_t, int64_t> tiles[] = {{c.base.block_m, c.base.block_n}, {16, 16}, {32, 64}};
  for (auto [bm, bn] : tiles) {
    const std::string label = fmt::format("{} at {}x{}", c.name, bm, bn);
    const HostBlockMask mask = make_host_block_mask(p, c.mods, c.tensors, bm, bn);
    expect_block_mask_matches_dense_mask(mask, p, c.mods, c.tensors, label);
    EXPECT_EQ(mask.runs, lists_are_runs(mask)) << label << ": whether every list is one run of tiles";
  }
}

TEST_P(BlockMaskInterp, ForwardOverTheBlockMaskMatchesTheReference) {
  const ModCase& c = GetParam();
  const AttentionProblem& p = c.base.problem;
  const Config config = mod_case_config(c);
  const HostBlockMask bm = make_host_block_mask(p, c.mods, c.tensors, c.base.block_m, c.base.block_n);
  const AttentionResult out = run_fa2_with_block_mask(p, c.mods, c.tensors, bm, config, mod_case_inputs(c));
  check_mod_case_result(c, out);
  if (bm.runs) { // the kernel that walks only the runs (the one the tuner may warp-specialise)
    Config runs = config;
    runs.set("BLOCK_MASK_RUNS", 1);
    check_mod_case_result(c, run_fa2_with_block_mask(p, c.mods, c.tensors, bm, runs, mod_case_inputs(c)));
  }
  // The same forward without the block mask: the same keys, visited in another order (full tiles first).
  const AttentionResult plain = run_fa2_with_mods(p, c.mods, c.tensors, config, mod_case_inputs(c));
  const double tol = attention_tolerance(p.dtype, p.tf32, max_abs_lse(plain));
  Comparison o = compare_to_reference(out.o, plain.o);
  EXPECT_TRUE(o.ok(tol)) << c.name << " O against the forward without a block mask: " << o.str();
}

INSTANTIATE_TEST_SUITE_P(block_mask, BlockMaskInterp, ::testing::ValuesIn(block_mask_cases()),
                         [](const auto& info) { return info.param.name; });

// A mask with a hole no key bounds describe (keys 16..63 hidden from every row): the forward without a block
// mask visits those tiles masked, and their NaN V spreads into O (p = 0 times NaN); over the block mask they
// are empty, never read, and O is right.
TEST(BlockMask, EmptyTilesAreNeverVisited) {
  AttentionProblem p = make_case(40, 128, 32, 0, DType::f32).problem;
  AttentionInputs in = make_inputs(p, 9, 1.0);
  for (int64_t j = 16; j < 64; ++j)
    for (int64_t d = 0; d < p.D; ++d)
      in.v.set(j * p.D + d, std::nan(""));
  AttentionMods mods;
  mods.mask = {MaskMod{"hole_16_64",
                       {},
                       [](const ModArgs& m) { return (m.kv_idx < 16) || (m.kv_idx >= 64); },
                       [](const ModPoint& m) { return m.kv_idx < 16 || m.kv_idx >= 64; },
                       {}}};
  Config config = default_fa2_config(p);
  config.set("BLOCK_M", 16).set("BLOCK_N", 16);
  const HostBlockMask bm = make_host_block_mask(p, mods, {}, 16, 16);
  EXPECT_EQ(bm.full_tiles(0, 0, 0), (std::vector<int64_t>{0, 4, 5, 6, 7}));
  EXPECT_TRUE(bm.partial_tiles(0, 0, 0).empty());
  EXPECT_FALSE(bm.runs) << "tiles 0, 4, 5, 6, 7 are not one run";
  AttentionResult out = run_fa2_with_block_mask(p, mods, {}, bm, config, in);
  AttentionResult ref = reference_with_mods(p, in, mods, {});
  Comparison o = compare_to_reference(out.o, ref.o);
  EXPECT_TRUE(o.ok(1e-5)) << o.str();
  AttentionResult visited = run_fa2_with_mods(p, mods, {}, config, in);
  EXPECT_TRUE(std::isnan(visited.o[0])) << "without the block mask the hole's tiles are read";
}

// Lists that are runs of tiles (a causal window's full tiles and its diagonal) are walked as key ranges,
// which cover the run and nothing more: V is NaN in every tile outside the lists (above the diagonal, and
// before the window), yet O is finite and right.
TEST(BlockMask, RunsOfTilesVisitNothingOutsideTheRun) {
  AttentionProblem p = make_case(64, 128, 32, 0, DType::f32).problem;
  AttentionMods mods;
  mods.mask = {sliding_window(20, 0)};
  const HostBlockMask bm = make_host_block_mask(p, mods, {}, 16, 16);
  // Query tile 3 (rows 48..63) sees keys 28..63: tiles 2 (partial), 3 (partial) and none full.
  EXPECT_EQ(bm.partial_tiles(0, 0, 3), (std::vector<int64_t>{1, 2, 3}));
  EXPECT_TRUE(bm.full_tiles(0, 0, 3).empty());
  EXPECT_EQ(bm.full_tiles(0, 0, 2), (std::vector<int64_t>{}));
  AttentionInputs in = make_inputs(p, 5, 1.0);
  for (int64_t j = 64; j < p.N_K; ++j) // above every row's diagonal
    for (int64_t d = 0; d < p.D; ++d)
      in.v.set(j * p.D + d, std::nan(""));
  Config config = default_fa2_config(p);
  config.set("BLOCK_M", 16).set("BLOCK_N", 16);
  AttentionResult out = run_fa2_with_block_mask(p, mods, {}, bm, config, in);
  AttentionResult ref = reference_with_mods(p, in, mods, {});
  Comparison o = compare_to_reference(out.o, ref.o);
  EXPECT_TRUE(o.ok(1e-5)) << o.str();

  // Causal: full tiles 0..2 of query tile 3 are a run, walked unmasked as a range.
  AttentionMods causal;
  causal.mask = {causal_mask(false)};
  const HostBlockMask cbm = make_host_block_mask(p, causal, {}, 16, 16);
  EXPECT_EQ(cbm.full_tiles(0, 0, 3), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(cbm.partial_tiles(0, 0, 3), (std::vector<int64_t>{3}));
  AttentionResult cref = reference_with_mods(p, in, causal, {});
  EXPECT_TRUE(bm.runs && cbm.runs);
  // Both kernels: the one that also has tile-by-tile loops, and the one of two key ranges (BLOCK_MASK_RUNS=1).
  for (int64_t runs : {0, 1}) {
    Config c = config;
    c.set("BLOCK_MASK_RUNS", runs);
    AttentionResult causal_out = run_fa2_with_block_mask(p, causal, {}, cbm, c, in);
    Comparison co = compare_to_reference(causal_out.o, cref.o);
    EXPECT_TRUE(co.ok(1e-5)) << "BLOCK_MASK_RUNS=" << runs << ": " << co.str();
  }
}

// Causal as a mask mod over a block mask visits what the built-in causal path visits: the tiles below the
// diagonal whole (full) and the diagonal's masked (partial), none above; and gives its results.
TEST(BlockMask, CausalAsAModVisitsTheBuiltInCausalTiles) {
  for (bool bottom_right : {false, true})
    for (auto [nq, nk] : {std::pair<int64_t, int64_t>{100, 100}, {17, 100}, {100, 17}, {128, 128}}) {
      AttentionCase c = make_case(nq, nk, 64, 0, DType::f32, 2, 1);
      AttentionMods mods;
      mods.mask = {causal_mask(bottom_right)};
      const HostBlockMask bm = make_host_block_mask(c.problem, mods, {}, 32, 16);
      AttentionProblem builtin = c.problem;
      builtin.causal = bottom_right ? 2 : 1;
      const HostBlockMask builtin_bm = make_host_block_mask(builtin, AttentionMods{}, {}, 32, 16);
      SCOPED_TRACE(fmt::format("{} {}x{}", bottom_right ? "bottom-right" : "top-left", nq, nk));
      for (int64_t h = 0; h < c.problem.H; ++h)
        for (int64_t m = 0; m < bm.layout.q_tiles(); ++m) {
          ASSERT_EQ(bm.full_tiles(0, h, m), builtin_bm.full_tiles(0, h, m)) << "query tile " << m;
          ASSERT_EQ(bm.partial_tiles(0, h, m), builtin_bm.partial_tiles(0, h, m)) << "query tile " << m;
          // The built-in path's unmasked stage ends where the first row's keys end in whole tiles.
          const int64_t m0 = m * 32, shift = bottom_right ? nk - nq : 0;
          const int64_t whole = std::clamp<int64_t>((m0 + shift + 1) / 16, 0, nk / 16);
          ASSERT_EQ(static_cast<int64_t>(bm.full_tiles(0, h, m).size()), whole) << "query tile " << m;
        }
      Config config = default_fa2_config(c.problem);
      config.set("BLOCK_M", 32).set("BLOCK_N", 16);
      AttentionInputs in = make_inputs(c.problem, 7, 1.0);
      AttentionResult out = run_fa2_with_block_mask(c.problem, mods, {}, bm, config, in);
      Config bconfig = default_fa2_config(builtin);
      bconfig.set("BLOCK_M", 32).set("BLOCK_N", 16);
      AttentionResult ref = run_fa2_interpreted(builtin, bconfig, in);
      Comparison o = compare_to_reference(out.o, ref.o);
      EXPECT_TRUE(o.ok(1e-5)) << o.str();
    }
}

// The classifier's kernel is named after the mask mods alone, and the forward over a block mask reads each
// key tile's index from the list (a scalar load) and makes its block pointers from it.
TEST(BlockMask, KernelsAreNamedAfterTheirModsAndReadTheLists) {
  AttentionMods mods;
  mods.mask = {sliding_window(8, 0)};
  mods.score = {softcap(30)};
  EXPECT_EQ(attention_block_mask_def(AttentionMods{}).name, "attention_block_mask");
  EXPECT_EQ(attention_block_mask_def(mods).name.rfind("attention_block_mask[|sliding_window(8,0)#", 0), 0u)
      << attention_block_mask_def(mods).name;
  EXPECT_EQ(&attention_block_mask_def(mods), &attention_block_mask_def(block_mask_mods(mods)));
  EXPECT_EQ(fa2_fwd_block_mask_def(mods).name.rfind("fa2_fwd_block_mask[softcap(30)|sliding_window(8,0)#", 0),
            0u)
      << fa2_fwd_block_mask_def(mods).name;
  const Config config = default_fa2_config(AttentionProblem{});
  const std::string ir = print_kernel(fa2_fwd_block_mask_def(mods).build(config));
  for (const char* arg : {"bm_full_count", "bm_full_index", "bm_partial_count", "bm_partial_index"})
    EXPECT_NE(ir.find(arg), std::string::npos) << arg;
  EXPECT_NE(ir.find("full_start_n"), std::string::npos);
  EXPECT_NE(ir.find("partial_start_n"), std::string::npos);
  for (const Config& c : fa2_fwd_block_mask_def().config_space())
    EXPECT_EQ(c.get("WARP_SPECIALIZE"), 0) << c.str();
}

} // namespace
