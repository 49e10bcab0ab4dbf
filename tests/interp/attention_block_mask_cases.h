// The block-mask cases the interpreter (attention_block_mask_test.cpp, attention_block_mask_bwd_test.cpp) and
// GPU (gpu/attention_block_mask_gpu_test.cpp) tests share, and the tile-by-tile check of a block mask against
// the dense mask: every (row, key) pair evaluated on the host through the mask mods' double references and the
// built-in rules, each tile classified empty / partial / full, the lists of both orientations compared with
// the block mask's.
#pragma once

#include "interp/attention_mods_cases.h"
#include "kernels/attention/attention_block_mask_host.h"

#include <limits>
#include <string>
#include <vector>

namespace kiln::testing_support {

// Whether row i of (b, h) sees key j: j < N_K, the problem's causal rule and every mask mod's reference
// (through mod_score_reference over the mask mods alone, which gives −inf for a hidden key).
class DenseMask {
public:
  DenseMask(const AttentionProblem& p, const AttentionMods& mods, const ModTensorValues& tensors) : p_(p) {
    masks_.mask = mods.mask;
    for (const ModTensorSpec& spec : masks_.tensors())
      mask_tensors_[spec.name] = tensors.at(spec.name);
    score_ = mod_score_reference(p, masks_, mask_tensors_);
  }
  DenseMask(const DenseMask&) = delete;

  bool sees(int64_t b, int64_t h, int64_t i, int64_t j) {
    return j < p_.N_K && visible(p_, i, j) && score_(b, h, i, j, 0.0) != -std::numeric_limits<double>::infinity();
  }

private:
  const AttentionProblem& p_;
  AttentionMods masks_;
  ModTensorValues mask_tensors_;
  ReferenceScoreFn score_;
};

enum class TileKind { Empty, Partial, Full };

// How the dense mask shows query tile m against key tile t of (b, h): full when nothing is hidden, partial when
// some pair is seen and some hidden, else empty. Rows past N_Q count for nothing, or with `tail_rows_hidden`
// (the by-key lists, which dK/dV visits unchecked when full) as hidden pairs.
inline TileKind dense_tile_kind(DenseMask& dense, const BlockMaskLayout& l, int64_t b, int64_t h, int64_t m,
                                int64_t t, bool tail_rows_hidden) {
  int64_t seen = 0, hidden = 0;
  const int64_t rows_end = tail_rows_hidden ? (m + 1) * l.block_m : std::min(l.N_Q, (m + 1) * l.block_m);
  for (int64_t i = m * l.block_m; i < rows_end; ++i)
    for (int64_t j = t * l.block_n; j < (t + 1) * l.block_n; ++j)
      ++(i < l.N_Q && dense.sees(b, h, i, j) ? seen : hidden);
  return hidden == 0 ? TileKind::Full : seen > 0 ? TileKind::Partial : TileKind::Empty;
}

// Every query tile's lists in `bm` are the tiles the dense mask shows fully (every real row sees every key)
// and partly (some pair seen, some hidden), ascending; tiles with no pair seen in neither. And every key
// tile's by-key lists are the query tiles that see it fully and partly, ascending, the tail query tile never
// full (its rows past N_Q count as hidden there).
inline void expect_block_mask_matches_dense_mask(const HostBlockMask& bm, const AttentionProblem& p,
                                                 const AttentionMods& mods, const ModTensorValues& tensors,
                                                 const std::string& label) {
  const BlockMaskLayout& l = bm.layout;
  DenseMask dense(p, mods, tensors);
  int64_t full = 0, partial = 0, empty = 0;
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t h = 0; h < p.H; ++h) {
      for (int64_t m = 0; m < l.q_tiles(); ++m) {
        std::vector<int64_t> want_full, want_partial;
        for (int64_t t = 0; t < l.k_tiles(); ++t) {
          const TileKind kind = dense_tile_kind(dense, l, b, h, m, t, false);
          if (kind == TileKind::Full)
            want_full.push_back(t), ++full;
          else if (kind == TileKind::Partial)
            want_partial.push_back(t), ++partial;
          else
            ++empty;
        }
        ASSERT_EQ(bm.full_tiles(b, h, m), want_full) << label << ": full tiles of b " << b << " h " << h
                                                     << " query tile " << m << " (" << l.str() << ")";
        ASSERT_EQ(bm.partial_tiles(b, h, m), want_partial)
            << label << ": partial tiles of b " << b << " h " << h << " query tile " << m << " (" << l.str()
            << ")";
      }
      for (int64_t t = 0; t < l.k_tiles(); ++t) {
        std::vector<int64_t> want_full, want_partial;
        for (int64_t m = 0; m < l.q_tiles(); ++m) {
          const TileKind kind = dense_tile_kind(dense, l, b, h, m, t, true);
          if (kind == TileKind::Full)
            want_full.push_back(m);
          else if (kind == TileKind::Partial)
            want_partial.push_back(m);
        }
        ASSERT_EQ(bm.full_query_tiles(b, h, t), want_full) << label << ": full query tiles of b " << b << " h "
                                                           << h << " key tile " << t << " (" << l.str() << ")";
        ASSERT_EQ(bm.partial_query_tiles(b, h, t), want_partial)
            << label << ": partial query tiles of b " << b << " h " << h << " key tile " << t << " ("
            << l.str() << ")";
      }
    }
  // Every case has masking work somewhere; most have all three kinds (the printout says which).
  EXPECT_GT(partial, 0) << label << ": no partial tile";
  ::testing::Test::RecordProperty(label, fmt::format("full {} partial {} empty {}", full, partial, empty));
}

// Whether every list of `bm` is one run of consecutive tiles or empty, from the lists themselves (what
// attention_block_mask_runs computes on the device into HostBlockMask::runs).
inline bool lists_are_runs(const HostBlockMask& bm) {
  const BlockMaskLayout& l = bm.layout;
  auto run = [](const std::vector<int64_t>& tiles) {
    return tiles.empty() || tiles.back() - tiles.front() == static_cast<int64_t>(tiles.size()) - 1;
  };
  for (int64_t b = 0; b < l.B; ++b)
    for (int64_t h = 0; h < l.H; ++h)
      for (int64_t m = 0; m < l.q_tiles(); ++m)
        if (!run(bm.full_tiles(b, h, m)) || !run(bm.partial_tiles(b, h, m)))
          return false;
  return true;
}

// The cases the block mask is built for: the library's mask mods and their combinations (mod_cases():
// causal both alignments, windows, prefix-LM, documents with rows that see no key, tails, GQA, score mods and
// sinks beside the masks), each at its tiles and at others, and the built-in causal rule with no mask mod.
inline std::vector<ModCase> block_mask_cases() {
  std::vector<ModCase> cs = mod_cases();
  {
    AttentionCase br = make_case(100, 17, 64, 2, DType::f16, 1, 1, false, true, 3.0); // scores up to ~70
    cs.push_back(mod_case("builtin_causal_br_100x17", br, {softcap(4)}, {}));
    AttentionCase tl = make_case(90, 90, 32, 1, DType::f16);
    tl.block_m = 32;
    tl.block_n = 16;
    cs.push_back(mod_case("builtin_causal_tl_window_90x90", tl, {}, {sliding_window(40, 0)}));
  }
  {
    // A window at tiles that hold it inside one tile (32 keys, window 8) and across several.
    AttentionCase w = make_case(130, 130, 32, 0, DType::f16, 2, 1);
    w.block_m = 16;
    w.block_n = 32;
    cs.push_back(mod_case("window_8_3_130x130_16x32", w, {}, {sliding_window(8, 3)}));
  }
  return cs;
}

} // namespace kiln::testing_support
