// The order FA2's forward takes its query tiles in (query_tile_program, kernels/attention/attention_mods.h):
// a bijection of the grid onto (tile, batch·head), and, where the caller asks for groups of heads (fa2_fwd: dense
// causal sequences, two or more CTAs an SM), the heaviest tiles of a group first, all the group's heads at one
// tile before the next lighter one.
#include "dsl/dsl.h"
#include "dsl/interpreter.h"
#include "kernels/attention/attention_mods.h"

#include <gtest/gtest.h>

#include <set>
#include <utility>
#include <vector>

using namespace kiln;

namespace {

struct Taken {
  int64_t tile, head;
};

// Program (x, y) writes the tile and head it takes at its start order, y · tiles + x.
std::vector<Taken> order_taken(CausalMode causal, int64_t tiles, int64_t heads, int64_t n_k, int64_t head_dim,
                               bool grouped = true) {
  AttentionTileParams tp;
  tp.block_m = 64;
  tp.block_n = 64;
  tp.head_dim = head_dim;
  tp.dtype = DType::f16;
  tp.causal = causal;
  KernelBuilder kb("tile_order", Config{});
  Value tile_out = kb.arg_ptr("tile", i32), head_out = kb.arg_ptr("head", i32);
  Value n_q = kb.arg("N_Q", i32), n_k_arg = kb.arg("N_K", i32);
  const QueryTileProgram p =
      query_tile_program(tp, AttentionMods{}, false, n_q, grouped ? std::optional<Value>(n_k_arg) : std::nullopt);
  Value at = program_id(1) * num_programs(0) + program_id(0);
  store(tile_out + at, p.start_m);
  store(head_out + at, p.off_hz);
  Kernel k = kb.finish();
  HostBuffer tile(DType::i32, tiles * heads), head(DType::i32, tiles * heads);
  interpret(k, Grid{tiles, heads, 1},
            {InterpArg::ptr(tile), InterpArg::ptr(head), InterpArg::of_int(tiles * 64), InterpArg::of_int(n_k)});
  std::vector<Taken> out;
  for (int64_t i = 0; i < tiles * heads; ++i)
    out.push_back({tile.get_int(i), head.get_int(i)});
  return out;
}

void expect_every_tile_once(const std::vector<Taken>& order, int64_t tiles, int64_t heads) {
  std::set<std::pair<int64_t, int64_t>> seen;
  for (const Taken& t : order) {
    ASSERT_GE(t.tile, 0);
    ASSERT_LT(t.tile, tiles);
    ASSERT_GE(t.head, 0);
    ASSERT_LT(t.head, heads);
    EXPECT_TRUE(seen.insert({t.tile, t.head}).second) << "tile " << t.tile << " of head " << t.head << " twice";
  }
  EXPECT_EQ(seen.size(), static_cast<size_t>(tiles * heads));
}

} // namespace

TEST(AttentionTileOrder, CausalDenseTakesTheHeaviestTilesOfAGroupOfHeadsFirst) {
  // D = 64, f16: a key's K and V rows are 256 bytes, so 24 MiB hold 98304 keys: 40000 keys a head make groups
  // of 2 heads, and 5 heads end with a group of one.
  const int64_t tiles = 3, heads = 5;
  const std::vector<Taken> order = order_taken(CausalMode::BottomRight, tiles, heads, 40000, 64);
  expect_every_tile_once(order, tiles, heads);
  const std::vector<std::pair<int64_t, int64_t>> expected = {
      {2, 0}, {2, 1}, {1, 0}, {1, 1}, {0, 0}, {0, 1}, // heads 0 and 1, heaviest tile first
      {2, 2}, {2, 3}, {1, 2}, {1, 3}, {0, 2}, {0, 3}, // heads 2 and 3
      {2, 4}, {1, 4}, {0, 4}};                        // head 4 alone
  ASSERT_EQ(order.size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(order[i].tile, expected[i].first) << "program " << i;
    EXPECT_EQ(order[i].head, expected[i].second) << "program " << i;
  }
}

TEST(AttentionTileOrder, ShortKeysPutEveryHeadInOneGroup) {
  const int64_t tiles = 4, heads = 3;
  const std::vector<Taken> order = order_taken(CausalMode::TopLeft, tiles, heads, 1000, 128);
  expect_every_tile_once(order, tiles, heads);
  for (size_t i = 0; i < order.size(); ++i) {
    EXPECT_EQ(order[i].tile, tiles - 1 - static_cast<int64_t>(i) / heads) << "program " << i;
    EXPECT_EQ(order[i].head, static_cast<int64_t>(i) % heads) << "program " << i;
  }
  // No keys at all: still a bijection (the group size divides by at least 1 key).
  expect_every_tile_once(order_taken(CausalMode::TopLeft, tiles, heads, 0, 128), tiles, heads);
}

TEST(AttentionTileOrder, NotCausalOrPackedKeepsTheGridsOrder) {
  const int64_t tiles = 3, heads = 4;
  // Not causal: program (x, y) takes tile x of head y.
  std::vector<Taken> order = order_taken(CausalMode::None, tiles, heads, 40000, 64);
  for (size_t i = 0; i < order.size(); ++i) {
    EXPECT_EQ(order[i].tile, static_cast<int64_t>(i) % tiles);
    EXPECT_EQ(order[i].head, static_cast<int64_t>(i) / tiles);
  }
  // Causal without groups (packed sequences, or one CTA an SM): head by head, the last tile first.
  order = order_taken(CausalMode::BottomRight, tiles, heads, 40000, 64, /*grouped=*/false);
  for (size_t i = 0; i < order.size(); ++i) {
    EXPECT_EQ(order[i].tile, tiles - 1 - static_cast<int64_t>(i) % tiles);
    EXPECT_EQ(order[i].head, static_cast<int64_t>(i) / tiles);
  }
}
