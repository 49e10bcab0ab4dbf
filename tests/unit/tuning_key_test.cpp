// The keys and candidates the kernel tuner (jit/tuned_kernel.h) builds for a real kernel, FA2 forward: sizes
// bucketed into the key, problem-fixed params in it, candidates that vary only tile params around the base,
// their labels, the device-side and kernel prunes, and buckets deciding between a retune and a cache hit.
#include "codegen/codegen.h"
#include "dsl/dsl.h"
#include "jit/tuned_kernel.h"
#include "kernels/attention/attention_bwd_problem.h"
#include "kernels/attention/attention_block_mask.h"
#include "kernels/attention/attention_mod_library.h"
#include "kernels/attention/attention_mods.h"
#include "kernels/attention/attention_problem.h"
#include "kernels/attention/fa2_bwd_block_mask.h"
#include "kernels/attention/fa2_fwd.h"
#include "kernels/builtin.h"
#include "kernels/vector_add/vector_add.h"
#include "temp_dir.h"
#include "unit/fake_tuning.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

using namespace kiln;
using namespace kiln::rt;
using namespace kiln::testing_support;

namespace {

AttentionProblem fa2_problem(int64_t n_q, int64_t n_k) {
  AttentionProblem p;
  p.B = 1;
  p.H = 4;
  p.H_KV = 4;
  p.N_Q = n_q;
  p.N_K = n_k;
  p.D = 64;
  p.dtype = DType::f16;
  return p;
}

TEST(TuningKey, SizesAreBucketedAndProblemFixedParamsAreInTheKey) {
  const KernelDef def = fa2_fwd_def();
  auto key = [&](const AttentionProblem& p) {
    return tuning_key_text(def, attention_size_args(p), default_fa2_config(p));
  };
  const std::string k1024 = key(fa2_problem(1024, 1024));
  EXPECT_EQ(k1024.substr(0, k1024.find(" |")), "B=1 H=4 N_Q=1024 N_K=1024");
  for (const char* fixed : {"CAUSAL=0", "DTYPE=0", "EVEN_D=1", "HEAD_DIM=64", "K_TRANSPOSED=1", "TF32=0"})
    EXPECT_NE(k1024.find(fixed), std::string::npos) << k1024;
  for (const char* tile : {"BLOCK_M", "BLOCK_N", "num_warps"})
    EXPECT_EQ(k1024.find(tile), std::string::npos) << k1024;
  EXPECT_EQ(key(fa2_problem(1000, 600)), key(fa2_problem(1024, 1024))) << "same bucket";
  EXPECT_NE(key(fa2_problem(1025, 1024)), k1024) << "next bucket";
  AttentionProblem causal = fa2_problem(1024, 1024);
  causal.causal = 1;
  EXPECT_NE(key(causal), k1024) << "flags are part of the key";
  AttentionProblem bf = fa2_problem(1024, 1024);
  bf.dtype = DType::bf16;
  EXPECT_NE(key(bf), k1024) << "dtypes are part of the key";
}

// vector_add's space varies its only param (BLOCK): its key is the size alone, with no bar after it (keys used
// to end in " |").
TEST(TuningKey, NoBarWithoutProblemFixedParams) {
  const std::string key = tuning_key_text(vector_add_def(), SizeArgs{{"n", 4096}}, Config());
  EXPECT_EQ(key, "n=4096");
}

TEST(TuningKey, UnknownOrMissingSizeNamesAreErrors) {
  const KernelDef def = fa2_fwd_def();
  const AttentionProblem p = fa2_problem(128, 128);
  SizeArgs sizes = attention_size_args(p);
  sizes["SEQ"] = 128;
  try {
    tuning_key_text(def, sizes, default_fa2_config(p));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("'SEQ'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("B, H, H_KV, N_Q, N_K, D"), std::string::npos) << msg;
  }
  sizes = attention_size_args(p);
  sizes.erase("N_K");
  try {
    tuning_key_text(def, sizes, default_fa2_config(p));
    FAIL() << "expected an error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("'N_K'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("B, H, N_Q, N_K"), std::string::npos) << msg;
  }
  Config bad = default_fa2_config(p);
  bad.set("BLOCKM", 64);
  EXPECT_THROW(tuning_key_text(def, attention_size_args(p), bad), Error);
}

TEST(TuningKey, CandidatesVaryOnlyTileParamsAroundTheBase) {
  const KernelDef def = fa2_fwd_def();
  AttentionProblem p = fa2_problem(1024, 1024);
  p.D = 128;
  p.causal = 2;
  const Config base = default_fa2_config(p);
  const std::vector<Config> cands = tuning_candidates(def, base);
  EXPECT_EQ(cands.size(), def.config_space().size());
  std::set<std::string> ids;
  for (const Config& c : cands) {
    ids.insert(c.str());
    for (const char* fixed : {"CAUSAL", "DTYPE", "EVEN_D", "HEAD_DIM", "K_TRANSPOSED", "TF32"})
      EXPECT_EQ(c.get(fixed), base.get(fixed)) << fixed << " in " << c.str();
  }
  EXPECT_EQ(ids.size(), cands.size()) << "candidates are distinct";
  EXPECT_EQ(tuned_params(def, def.config_space()),
            (std::vector<std::string>{"BLOCK_M", "BLOCK_N", "LAST_PRODUCT_LATE", "LAZY_RESCALE", "MIN_BLOCKS_PER_SM",
                                      "PERSISTENT", "TILE_BARRIERS", "WARP_SPECIALIZE"}));
}

// A space that sets a param to one value in every config, other than the default, chooses it as surely as one
// that varies it: the candidates keep the space's value (they once took the default's, silently), and the key
// leaves it out. A param every config leaves at its default stays the problem's.
TEST(TuningKey, AParamTheSpacePinsIsTunedNotTakenFromTheBase) {
  KernelDef d;
  d.name = "pinned";
  d.params = {ParamDef::power_of_two("BLOCK_N", 1024, "row tile", 16, 16384),
              ParamDef::power_of_two("ROWS", 1, "rows", 1, 16), ParamDef::flag("FAST", 0, "a problem flag")};
  d.build = [](const Config& c) {
    KernelBuilder kb("pinned", c);
    kb.arg("n", i32);
    return kb.finish();
  };
  d.size_args = {"n"};
  d.tuning_key = {"n"};
  d.config_space = [] {
    std::vector<Config> space;
    for (int64_t rows : {1, 2}) {
      Config c;
      c.set("BLOCK_N", 4096).set("ROWS", rows).set("FAST", 0);
      space.push_back(c);
    }
    return space;
  };
  EXPECT_EQ(tuned_params(d, d.config_space()), (std::vector<std::string>{"BLOCK_N", "ROWS"}));
  Config base = d.default_config();
  base.set("FAST", 1);
  for (const Config& c : tuning_candidates(d, base)) {
    EXPECT_EQ(c.get("BLOCK_N"), 4096) << c.str();
    EXPECT_EQ(c.get("FAST"), 1) << "the problem's flag: " << c.str();
  }
  EXPECT_EQ(tuning_key_text(d, SizeArgs{{"n", 8}}, base), "n=8 | FAST=1");
}

// Every shipped kernel, tuned from its default config: each candidate is its space's config in every param the
// space sets (the check above, on the kernels users run; matmul_split_k pins BLOCK_K and MIN_BLOCKS_PER_SM).
TEST(TuningKey, ShippedCandidatesAreTheirSpacesConfigs) {
  for (const KernelDef& def : builtin_kernels().all()) {
    if (!def.config_space)
      continue;
    const std::vector<Config> space = def.config_space();
    const std::vector<Config> cands = tuning_candidates(def, def.default_config());
    ASSERT_EQ(cands.size(), space.size()) << def.name;
    for (size_t i = 0; i < space.size(); ++i)
      for (const auto& [name, value] : space[i].params)
        EXPECT_EQ(cands[i].get(name), value) << def.name << " " << name;
  }
}

// Progress lines name a candidate as issue 5 shows them: "BM=128 BN=64 w=8 s=3"; other varied params only
// where they leave the kernel's default.
TEST(TuningKey, CandidateLabelsAreShortAndSayWhatDiffers) {
  const KernelDef def = fa2_fwd_def();
  const std::vector<std::string> varied = tuned_params(def, def.config_space());
  Config c = default_fa2_config(fa2_problem(1024, 1024));
  c.set("BLOCK_M", 128).set("BLOCK_N", 64).set("MIN_BLOCKS_PER_SM", 1);
  c.num_warps = 8;
  c.num_stages = 3;
  EXPECT_EQ(candidate_label(def, c, varied), "BM=128 BN=64 w=8 s=3");
  c.set("MIN_BLOCKS_PER_SM", 2);
  c.num_stages = 2;
  EXPECT_EQ(candidate_label(def, c, varied), "BM=128 BN=64 w=8 s=2 MIN_BLOCKS_PER_SM=2");
  std::set<std::string> labels;
  for (const Config& cand : tuning_candidates(def, default_fa2_config(fa2_problem(1024, 1024))))
    labels.insert(candidate_label(def, cand, varied));
  EXPECT_EQ(labels.size(), def.config_space().size()) << "every candidate's label is its own";
}

// Issue 5 asks for at least 24 FA2 configs; each must be one the hardware can use: whole m16 MMA tiles per
// warp, a register cap of exactly 128 wherever MIN_BLOCKS_PER_SM asks for more than one CTA an SM (the
// point of those configs; a warp-specialised CTA counts its producer warpgroup too, whose registers setmaxnreg
// then hands to the consumers), and every tile a power of two the kernel builds.
TEST(TuningKey, Fa2SpaceHasAtLeast24DistinctUsableConfigs) {
  const KernelDef def = fa2_fwd_def();
  const std::vector<Config> space = def.config_space();
  EXPECT_GE(space.size(), 24u);
  std::set<std::string> ids;
  std::set<int> stages;
  for (const Config& c : space) {
    ids.insert(c.str());
    stages.insert(c.num_stages);
    const int64_t bm = c.get("BLOCK_M"), bn = c.get("BLOCK_N"), min_blocks = c.get("MIN_BLOCKS_PER_SM");
    EXPECT_GE(bm / c.num_warps, 16) << c.str();
    EXPECT_EQ(bm & (bm - 1), 0) << c.str();
    EXPECT_EQ(bn & (bn - 1), 0) << c.str();
    if (min_blocks > 1) { // CTAs sharing an SM enter at 128 registers, or (the warp-specialised 64 x 64 tile four
                          // CTAs an SM) at 64, its consumers then taking the producer's (setmaxnreg)
      const bool ws = c.get("WARP_SPECIALIZE") != 0;
      const int64_t threads = c.num_warps * 32 + (ws ? 128 : 0);
      EXPECT_EQ(65536 / (min_blocks * threads), ws && min_blocks == 4 ? 64 : 128) << c.str();
    }
    AttentionProblem p = fa2_problem(256, 256);
    Config built = default_fa2_config(p);
    built.set("BLOCK_M", bm).set("BLOCK_N", bn).set("MIN_BLOCKS_PER_SM", min_blocks);
    EXPECT_NO_THROW(def.build(built)) << c.str();
  }
  EXPECT_EQ(ids.size(), space.size()) << "configs are distinct";
  EXPECT_EQ(stages, (std::set<int>{1, 2, 3, 4})); // 1: the small tiles for f32 at HEAD_DIM = 256
}

// The device-side prune: shared memory past the per-block opt-in limit, or MIN_BLOCKS_PER_SM blocks whose
// shared memory, each with its reserved kilobyte, cannot share one SM.
TEST(TuningKey, DevicePruneChecksSharedMemoryPerBlockAndPerSm) {
  rt::DeviceInfo h100;
  h100.name = "Fake H100";
  h100.max_shared_per_block_optin = 227 * 1024;
  h100.max_shared_per_sm = 228 * 1024;
  Config one;
  one.set("BLOCK_M", 128);
  EXPECT_EQ(device_prune_reason(one, 200 * 1024, h100), "");
  std::string why = device_prune_reason(one, 230 * 1024, h100);
  EXPECT_NE(why.find("235520 bytes"), std::string::npos) << why;
  EXPECT_NE(why.find("opt-in"), std::string::npos) << why;
  Config two = one;
  two.set("MIN_BLOCKS_PER_SM", 2);
  EXPECT_EQ(device_prune_reason(two, 100 * 1024, h100), "") << "2 x 100 KiB fit in 228 KiB";
  why = device_prune_reason(two, 120 * 1024, h100);
  EXPECT_NE(why.find("MIN_BLOCKS_PER_SM=2 needs 2 x (122880 + 1024 reserved) bytes"), std::string::npos) << why;
  EXPECT_NE(why.find("233472"), std::string::npos) << why;
  Config four = one;
  four.set("MIN_BLOCKS_PER_SM", 4);
  EXPECT_NE(device_prune_reason(four, 60 * 1024, h100), "");
  EXPECT_EQ(device_prune_reason(four, 56 * 1024, h100), "") << "4 x (56 + 1) KiB fill 228 KiB";
  EXPECT_NE(device_prune_reason(four, 56 * 1024 + 512, h100), "") << "4 x 56.5 KiB fit, not with the reserves";
}

// A CTA's shared memory as the launch takes it: the dynamic bytes, and the kernel's own __shared__ variables (a TMA
// ring's mbarriers) padded to the dynamic region's 1024-byte alignment, which ptxas reports as static.
TEST(TuningKey, GeneratedKernelsCountTheirStaticSharedMemory) {
  const KernelDef& def = builtin_kernels().find("fa2_bwd_dkdv");
  const Config ws = def.with_overrides(def.default_config(), {{"WARP_SPECIALIZE", 1}, {"MIN_BLOCKS_PER_SM", 2}});
  EXPECT_EQ(generate_cuda(def.build(ws), Target::parse("sm_90a")).static_shared_bytes, 1024);
  EXPECT_EQ(generate_cuda(def.build(def.default_config()), Target::parse("sm_80")).static_shared_bytes, 0);
}

TEST(TuningKey, Fa2PrunesTilesWiderThanTheProblemButKeepsOne) {
  const KernelDef def = fa2_fwd_def();
  const AttentionProblem p = fa2_problem(50, 20);
  const SizeArgs sizes = attention_size_args(p);
  int kept = 0;
  for (const Config& c : tuning_candidates(def, default_fa2_config(p))) {
    std::string why = def.prune(c, sizes);
    if (why.empty()) { // the space's floors (64 rows, 32 keys) and the smaller tiles for wide f32 heads
      ++kept;
      EXPECT_LE(c.get("BLOCK_M"), 64) << c.str();
      EXPECT_LE(c.get("BLOCK_N"), 32) << c.str();
    } else if (c.get("BLOCK_M") == 128) {
      EXPECT_NE(why.find("BLOCK_M=128"), std::string::npos) << why;
      EXPECT_NE(why.find("N_Q=50"), std::string::npos) << why;
    } else {
      EXPECT_NE(why.find("N_K=20"), std::string::npos) << why;
    }
  }
  EXPECT_GT(kept, 0);
  for (const Config& c : tuning_candidates(def, default_fa2_config(fa2_problem(4096, 4096))))
    EXPECT_EQ(def.prune(c, attention_size_args(fa2_problem(4096, 4096))), "") << c.str();
}

// The static persistent grid (PERSISTENT=1) walks fixed query tiles, so it is pruned wherever later tiles are
// heavier: under the built-in causal mask, under a mask mod whose later rows see more keys (the same predicate that
// starts such tiles heaviest first), and under any block mask. A mask mod without that hint keeps it.
TEST(TuningKey, Fa2PrunesTheStaticPersistentGridWhereLaterQueryTilesAreHeavier) {
  const SizeArgs sizes = attention_size_args(fa2_problem(4096, 4096));
  Config persistent;
  for (const Config& c : fa2_fwd_def().config_space())
    if (c.get_or("PERSISTENT", 0) == 1)
      persistent = c;
  ASSERT_EQ(persistent.get_or("PERSISTENT", 0), 1) << "the space offers a static persistent tile";
  Config causal = persistent;
  causal.set("CAUSAL", 1);
  EXPECT_EQ(fa2_fwd_def().prune(persistent, sizes), "");
  EXPECT_NE(fa2_fwd_def().prune(causal, sizes).find("PERSISTENT=1 with a causal mask"), std::string::npos);

  AttentionMods causal_mod;
  causal_mod.mask.push_back(causal_mask());
  const std::string why = fa2_fwd_def(causal_mod).prune(persistent, sizes);
  EXPECT_NE(why.find("mask mod 'causal"), std::string::npos) << why;
  EXPECT_NE(why.find("later_rows_see_more"), std::string::npos) << why;
  Config plain = persistent;
  plain.set("PERSISTENT", 0);
  EXPECT_EQ(fa2_fwd_def(causal_mod).prune(plain, sizes), "") << "only the persistent grid goes";

  AttentionMods window;
  window.mask.push_back(sliding_window(256, 256)); // both ways open: no row sees more than the one before
  ASSERT_FALSE(window.mask[0].later_rows_see_more);
  EXPECT_EQ(fa2_fwd_def(window).prune(persistent, sizes), "");

  Config runs = persistent;
  runs.set("BLOCK_MASK_RUNS", 1);
  EXPECT_NE(fa2_fwd_block_mask_def().prune(runs, sizes).find("PERSISTENT=1 with a block mask"), std::string::npos);
  EXPECT_NE(fa2_fwd_block_mask_def(window).prune(runs, sizes).find("block mask"), std::string::npos);
  runs.set("PERSISTENT", 0);
  EXPECT_EQ(fa2_fwd_block_mask_def().prune(runs, sizes), "");
}

// The dynamic persistent grid (PERSISTENT=2) balances heavier later tiles by drawing them: offered on the static
// one's tile and kept under a causal mask (worklog §108), pruned over block masks (not checked there).
TEST(TuningKey, Fa2OffersTheDynamicPersistentGridUnderACausalMask) {
  const SizeArgs sizes = attention_size_args(fa2_problem(4096, 4096));
  Config dynamic, fixed;
  for (const Config& c : fa2_fwd_def().config_space()) {
    if (c.get_or("PERSISTENT", 0) == 2)
      dynamic = c;
    if (c.get_or("PERSISTENT", 0) == 1)
      fixed = c;
  }
  ASSERT_EQ(dynamic.get_or("PERSISTENT", 0), 2) << "the space offers a dynamic persistent tile";
  Config same_tile = dynamic;
  same_tile.set("PERSISTENT", 1);
  EXPECT_EQ(same_tile.str(), fixed.str()) << "the static grid's tile";
  Config causal = dynamic;
  causal.set("CAUSAL", 1);
  EXPECT_EQ(fa2_fwd_def().prune(dynamic, sizes), "");
  EXPECT_EQ(fa2_fwd_def().prune(causal, sizes), "");
  Config runs = dynamic;
  runs.set("BLOCK_MASK_RUNS", 1);
  EXPECT_NE(fa2_fwd_block_mask_def().prune(runs, sizes).find("PERSISTENT=2 with a block mask"), std::string::npos);
}

// The backward's spaces keep a tile only where it can pay (worklog §88): dK/dV's 128 x 128 warp-specialised tile
// up to 64 columns (with the fused dQ adds too, its products in the program's order: §109), 32 x 32 over 2 warps
// for f32 or heads past 128 columns.
TEST(TuningKey, TheBackwardPrunesTilesForTheHeadsAndTypesTheyServe) {
  auto kept = [](const AttentionProblem& p, bool atomic_dq, bool dkdv, auto&& is_tile) {
    const KernelDef& def = dkdv ? builtin_kernels().find("fa2_bwd_dkdv") : builtin_kernels().find("fa2_bwd_dq");
    int found = 0, pruned = 0;
    for (const Config& c : dkdv ? bwd_dkdv_config_space(p, atomic_dq) : bwd_dq_config_space(p)) {
      if (!is_tile(c))
        continue;
      ++found;
      const std::string why = def.prune(c, attention_size_args(p));
      pruned += !why.empty();
    }
    EXPECT_EQ(found, 1) << "the space holds the tile once";
    return found == 1 && pruned == 0;
  };
  auto square128 = [](const Config& c) {
    return c.get("BLOCK_M") == 128 && c.get("BLOCK_N") == 128 && c.get("WARP_SPECIALIZE") == 1 &&
           c.get("PERSISTENT") == 0;
  };
  auto square32 = [](const Config& c) { return c.get("BLOCK_M") == 32 && c.get("BLOCK_N") == 32; };
  AttentionProblem p = fa2_problem(4096, 4096);
  EXPECT_TRUE(kept(p, false, true, square128));
  EXPECT_TRUE(kept(p, true, true, square128));
  for (const Config& c : bwd_dkdv_config_space(p, true))
    if (square128(c)) {
      EXPECT_EQ(c.get("PRODUCTS_IN_ORDER"), 1) << c.str();
      Config early = c;
      early.set("PRODUCTS_IN_ORDER", 0);
      EXPECT_NE(builtin_kernels().find("fa2_bwd_dkdv").prune(early, attention_size_args(p)).find("PRODUCTS_IN_ORDER=1"),
                std::string::npos)
          << "the fused tile spills with its products issued early";
    }
  EXPECT_FALSE(kept(p, false, true, square32));
  EXPECT_FALSE(kept(p, false, false, square32));
  p.D = 128;
  EXPECT_FALSE(kept(p, false, true, square128));
  EXPECT_FALSE(kept(p, false, true, square32));
  p.D = 256;
  EXPECT_TRUE(kept(p, false, true, square32));
  EXPECT_TRUE(kept(p, false, false, square32));
  p.D = 64;
  p.dtype = DType::f32;
  EXPECT_TRUE(kept(p, false, true, square32));
  EXPECT_TRUE(kept(p, false, false, square32));
}

// Past 64 columns the forward's unspecialised 128 x 128 tile over 4 warps spills about 6 KB a thread and measured
// 8 times slower than the space's best (worklog §112): pruned there, kept at D = 64 and warp-specialised.
TEST(TuningKey, TheForwardPrunes128x128Over4WarpsPast64Columns) {
  for (int64_t d : {64, 128}) {
    AttentionProblem p = fa2_problem(4096, 4096);
    p.D = d;
    int found = 0, pruned = 0;
    for (const Config& c : fa2_config_space(p)) {
      if (c.get("BLOCK_M") != 128 || c.get("BLOCK_N") != 128 || c.num_warps != 4)
        continue;
      ++found;
      const std::string why = fa2_fwd_def().prune(c, attention_size_args(p));
      pruned += !why.empty();
      if (d == 128) {
        EXPECT_NE(why.find("heads of at most 64 columns"), std::string::npos) << c.str();
      }
    }
    EXPECT_EQ(found, 2) << "two and three stages";
    EXPECT_EQ(pruned, d == 128 ? 2 : 0);
  }
}

// Past 64 columns dK/dV's 128-row steps over 4 warps and the fused dQ adds over two CTAs an SM spill and measured
// 3-7 times slower than the space's best (worklog §112): pruned there, kept at D = 64 (and the two-CTA tile kept
// deterministic).
TEST(TuningKey, TheBackwardPrunesTheTilesThatSpillPast64Columns) {
  const KernelDef& def = builtin_kernels().find("fa2_bwd_dkdv");
  auto kept = [&](int64_t d, bool atomic_dq, auto&& is_tile) {
    AttentionProblem p = fa2_problem(4096, 4096);
    p.D = d;
    int found = 0, pruned = 0;
    for (const Config& c : bwd_dkdv_config_space(p, atomic_dq)) {
      if (!is_tile(c))
        continue;
      ++found;
      pruned += !def.prune(c, attention_size_args(p)).empty();
    }
    EXPECT_EQ(found, 1) << "the space holds the tile once";
    return found == 1 && pruned == 0;
  };
  auto long_steps = [](const Config& c) {
    return c.get("BLOCK_M") == 128 && c.get("BLOCK_N") == 64 && c.num_warps == 4;
  };
  auto two_ctas = [](const Config& c) { return c.get("MIN_BLOCKS_PER_SM") == 2 && c.get("PERSISTENT") == 0; };
  for (bool atomic_dq : {false, true}) {
    EXPECT_TRUE(kept(64, atomic_dq, long_steps));
    EXPECT_FALSE(kept(128, atomic_dq, long_steps));
    EXPECT_TRUE(kept(64, atomic_dq, two_ctas));
  }
  EXPECT_TRUE(kept(128, false, two_ctas));
  EXPECT_FALSE(kept(128, true, two_ctas));
}

// Both backward loops offer their warp-specialised tiles on a static persistent grid too, and prune them under a
// causal mask, where the programs' work differs along the walk (dK/dV's first key tiles, dQ's last query tiles
// are the heaviest).
TEST(TuningKey, TheBackwardOffersTheStaticPersistentGridWithoutACausalMask) {
  for (const char* name : {"fa2_bwd_dkdv", "fa2_bwd_dq"}) {
    SCOPED_TRACE(name);
    const KernelDef& def = builtin_kernels().find(name);
    int persistent = 0;
    for (const Config& c : def.config_space()) {
      if (c.get("PERSISTENT") == 0)
        continue;
      ++persistent;
      EXPECT_EQ(c.get("WARP_SPECIALIZE"), 1) << c.str();
      for (int64_t causal : {0, 1, 2}) {
        AttentionProblem p = fa2_problem(4096, 4096);
        p.causal = causal;
        const std::string why = def.prune(with_attention_problem(c, p), attention_size_args(p));
        if (causal == 0)
          EXPECT_EQ(why, "") << c.str();
        else
          EXPECT_NE(why.find("PERSISTENT=1 with CAUSAL="), std::string::npos) << c.str() << ": " << why;
      }
    }
    EXPECT_GE(persistent, 2);
  }
  // Over a block mask neither loop takes it (each program reads its own list; the kernels refuse it).
  for (const KernelDef* def : {&fa2_bwd_dkdv_block_mask_def(), &fa2_bwd_dq_block_mask_def()})
    for (const Config& c : def->config_space())
      EXPECT_EQ(c.get("PERSISTENT"), 0) << def->name << " " << c.str();
}

// Keys from tuning_key_text drive the generic tuner: a new bucket tunes, the same bucket compiles nothing.
TEST(TuningKey, BucketsDecideBetweenRetuneAndCacheHit) {
  const KernelDef def = fa2_fwd_def();
  TempDir dir{"kiln-autotuner-test"};
  FakeKernel k;
  three_configs(k);
  Autotuner tuner(dir.path(), quiet());
  auto tune_for = [&](int64_t n) {
    AttentionProblem p = fa2_problem(n, n);
    return tuner.tune(k.request(tuning_key_text(def, attention_size_args(p), default_fa2_config(p))),
                      k.hooks());
  };
  EXPECT_EQ(tune_for(700).source, TuneSource::Tuned);
  EXPECT_EQ(k.compiles, 3);
  EXPECT_EQ(tune_for(1024).source, TuneSource::Memory);
  EXPECT_EQ(tune_for(513).source, TuneSource::Memory);
  EXPECT_EQ(k.compiles, 3);
  EXPECT_EQ(tune_for(1025).source, TuneSource::Tuned);
  EXPECT_EQ(k.compiles, 6);
}

} // namespace
