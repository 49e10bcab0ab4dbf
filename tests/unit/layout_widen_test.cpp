// widen_register_run: exchanging register bits with lane bits so that a thread holds 16-byte runs along the
// contiguous dim (the emitter's vectorised block store, emit_cuda.cpp). The exchange must move elements
// between threads, never lose or duplicate one.
#include "codegen/layout.h"

#include <gtest/gtest.h>

#include <set>

namespace kiln {
namespace {

// Every (thread, register) -> element coordinate of a layout, as a sorted multiset key list.
std::multiset<std::vector<int64_t>> elements(const Layout& l, int num_warps) {
  std::multiset<std::vector<int64_t>> out;
  for (int w = 0; w < num_warps; ++w)
    for (int lane = 0; lane < 32; ++lane)
      for (int r = 0; r < l.num_regs(); ++r) {
        std::vector<int64_t> c(l.rank(), 0);
        for (int d = 0; d < l.rank(); ++d) {
          c[d] = l.reg_offset(r, d);
          for (size_t b = 0; b < l.lane.size(); ++b)
            if (lane >> b & 1)
              c[d] += l.lane[b][d];
          for (size_t b = 0; b < l.warp.size(); ++b)
            if (w >> b & 1)
              c[d] += l.warp[b][d];
        }
        out.insert(c);
      }
  return out;
}

TEST(LayoutWiden, MmaAccumulatorBecomesEightColumnRuns) {
  WarpSplit ws{8, 1, 8};
  Layout acc = mma_acc_layout(128, 128, ws);
  ASSERT_EQ(register_run(acc, 1, 8), 2) << "an mma accumulator holds column pairs";
  std::vector<LaneRegisterSwap> swaps;
  Layout wide = widen_register_run(acc, 1, 8, swaps);
  EXPECT_EQ(register_run(wide, 1, 8), 8) << wide.str();
  ASSERT_EQ(swaps.size(), 2u);
  EXPECT_EQ(swaps[0].reg_bit, 1);
  EXPECT_EQ(swaps[1].reg_bit, 2);
  EXPECT_EQ(elements(wide, 8), elements(acc, 8)) << "the same elements, each once";
  EXPECT_EQ(wide.num_regs(), acc.num_regs());
}

TEST(LayoutWiden, F32RunStopsAtFourElements) {
  WarpSplit ws{4, 1, 4};
  Layout acc = mma_acc_layout(64, 64, ws);
  std::vector<LaneRegisterSwap> swaps;
  Layout wide = widen_register_run(acc, 1, 4, swaps); // 16 bytes of f32
  EXPECT_EQ(register_run(wide, 1, 4), 4);
  EXPECT_EQ(swaps.size(), 1u);
  EXPECT_EQ(elements(wide, 4), elements(acc, 4));
}

TEST(LayoutWiden, BlockedLayoutNeedsNoExchange) {
  Layout b = blocked_layout({64, 64}, 4, 8);
  std::vector<LaneRegisterSwap> swaps;
  Layout wide = widen_register_run(b, 1, 8, swaps);
  EXPECT_TRUE(swaps.empty());
  EXPECT_TRUE(wide.same_bases(b));
}

TEST(LayoutWiden, StopsWhereNoLaneContinuesTheRun) {
  // Along the rows of an accumulator no register bit steps 1 and no lane bit does at the start of a run
  // from register bit 0: nothing to exchange.
  WarpSplit ws{4, 1, 4};
  Layout acc = mma_acc_layout(64, 64, ws);
  std::vector<LaneRegisterSwap> swaps;
  Layout wide = widen_register_run(acc, 0, 8, swaps);
  EXPECT_EQ(elements(wide, 4), elements(acc, 4));
  EXPECT_EQ(register_run(wide, 0, 8), register_run(acc, 0, 8) * (1 << swaps.size()));
}

} // namespace
} // namespace kiln
