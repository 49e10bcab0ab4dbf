// The tensor-core instruction shapes as data (codegen/mma_shape.h): each fragment element sits where the PTX
// ISA's fragment figures put it (the formulas below are the ISA's, written out independently of the bases);
// the mma layouts layout.cpp builds are tiles of those fragments; and the register an emitter picks for an
// instruction (FragmentTiling) holds the element the instruction expects.
#include "codegen/layout.h"
#include "codegen/mma_shape.h"
#include "support/error.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <functional>
#include <set>
#include <utility>

namespace kiln {
namespace {

using Element = std::pair<int64_t, int64_t>; // (row, col)
// The PTX ISA's position of element `i` of a thread's fragment, from its lane (groupID = lane >> 2,
// threadID_in_group = lane % 4) and its warp within the instruction's warps.
using PtxRule = std::function<Element(int warp, int lane, int i)>;

// Every register of every thread of the instruction holds the element `rule` names, and together they cover
// the rows x cols fragment exactly once.
void expect_fragment(const Fragment& f, int warps, int regs, int64_t rows, int64_t cols, const PtxRule& rule,
                     const std::string& what) {
  SCOPED_TRACE(what);
  ASSERT_EQ(f.rows, rows);
  ASSERT_EQ(f.cols, cols);
  ASSERT_EQ(f.regs(), regs);
  ASSERT_EQ(f.lane.size(), 5u);
  ASSERT_EQ(1 << f.warp.size(), warps);
  std::set<Element> seen;
  for (int w = 0; w < warps; ++w)
    for (int lane = 0; lane < 32; ++lane)
      for (int i = 0; i < regs; ++i) {
        const Element e = f.element(w, lane, i);
        EXPECT_EQ(e, rule(w, lane, i)) << "warp " << w << " lane " << lane << " register " << i;
        seen.insert(e);
      }
  EXPECT_EQ(static_cast<int64_t>(seen.size()), rows * cols) << "each element held by exactly one register";
}

int group(int lane) { return lane >> 2; }
int thread_in_group(int lane) { return lane % 4; }

TEST(MmaShape, M16n8k16FragmentsAreThePtxIsas) {
  for (DType in : {DType::f16, DType::bf16}) {
    const MmaShape& s = mma_sync_shape(in);
    EXPECT_EQ(s.name(), "mma.sync.m16n8k16");
    EXPECT_EQ(s.elements_per_register, 2);
    // a_i: row groupID (+8 for i = 2, 3, 6, 7); col 2 * threadID_in_group + (i & 1) (+8 for i >= 4)
    expect_fragment(s.a, 1, 8, 16, 16, [](int, int l, int i) {
      return Element{group(l) + 8 * ((i >> 1) & 1), 2 * thread_in_group(l) + (i & 1) + 8 * (i >> 2)};
    }, "A");
    // b_i: row 2 * threadID_in_group + (i & 1) (+8 for i >= 2); col groupID
    expect_fragment(s.b, 1, 4, 16, 8, [](int, int l, int i) {
      return Element{2 * thread_in_group(l) + (i & 1) + 8 * (i >> 1), group(l)};
    }, "B");
    // c_i: row groupID (+8 for i >= 2); col 2 * threadID_in_group + (i & 1)
    expect_fragment(s.c, 1, 4, 16, 8, [](int, int l, int i) {
      return Element{group(l) + 8 * (i >> 1), 2 * thread_in_group(l) + (i & 1)};
    }, "C");
    // a0 and a1 share the first .f16x2 register, and so on.
    EXPECT_EQ(s.packed_registers(0), (std::vector<int>{0, 1}));
    EXPECT_EQ(s.packed_registers(3), (std::vector<int>{6, 7}));
  }
}

TEST(MmaShape, M16n8k8Tf32FragmentsAreThePtxIsas) {
  const MmaShape& s = mma_sync_shape(DType::f32);
  EXPECT_EQ(s.name(), "mma.sync.m16n8k8.tf32");
  EXPECT_EQ(s.k, 8);
  EXPECT_EQ(s.elements_per_register, 1);
  // a0..a3: row groupID (+8 for a1, a3); col threadID_in_group (+4 for a2, a3)
  expect_fragment(s.a, 1, 4, 16, 8, [](int, int l, int i) {
    return Element{group(l) + 8 * (i & 1), thread_in_group(l) + 4 * (i >> 1)};
  }, "A");
  // b0, b1: row threadID_in_group (+4 for b1); col groupID
  expect_fragment(s.b, 1, 2, 8, 8, [](int, int l, int i) { return Element{thread_in_group(l) + 4 * i, group(l)}; },
                  "B");
  expect_fragment(s.c, 1, 4, 16, 8, [](int, int l, int i) {
    return Element{group(l) + 8 * (i >> 1), 2 * thread_in_group(l) + (i & 1)};
  }, "C");
}

TEST(MmaShape, WgmmaM64nNk16FragmentsAreThePtxIsas) {
  for (int64_t n : {8, 64, 128, 256}) {
    const MmaShape s = wgmma_shape(n);
    EXPECT_EQ(s.name(), fmt::format("wgmma.m64n{}k16", n));
    EXPECT_EQ(s.warps, 4);
    // D: row 16 * warp + groupID (+8 for i % 4 >= 2); col 8 * (i / 4) + 2 * threadID_in_group + (i & 1)
    expect_fragment(s.c, 4, static_cast<int>(n / 2), 64, n, [](int w, int l, int i) {
      return Element{16 * w + group(l) + 8 * ((i >> 1) & 1), 8 * (i >> 2) + 2 * thread_in_group(l) + (i & 1)};
    }, fmt::format("D of n{}", n));
    // A from registers: mma.m16n8k16's A fragment for each warp's 16 rows.
    expect_fragment(s.a, 4, 8, 64, 16, [](int w, int l, int i) {
      return Element{16 * w + group(l) + 8 * ((i >> 1) & 1), 2 * thread_in_group(l) + (i & 1) + 8 * (i >> 2)};
    }, "A");
  }
  EXPECT_THROW(wgmma_shape(12), InternalError);
  EXPECT_THROW(wgmma_shape(264), InternalError);
}

// The (row, col) of register r of a thread of a layout.
Element at(const Layout& l, int warp, int lane, int r) {
  Element e{l.reg_offset(r, 0), l.reg_offset(r, 1)};
  for (size_t b = 0; b < l.lane.size(); ++b)
    if (lane >> b & 1)
      e.first += l.lane[b][0], e.second += l.lane[b][1];
  for (size_t b = 0; b < l.warp.size(); ++b)
    if (warp >> b & 1)
      e.first += l.warp[b][0], e.second += l.warp[b][1];
  return e;
}

// A tile layout holds, at FragmentTiling's register of fragment (outer, inner) of each warp, the element that
// fragment's register holds, offset to where that fragment sits: outer fragments `outer_step` apart, inner
// ones a fragment apart, and the warp's own offset.
void expect_tiles(const Layout& l, const Fragment& f, int inner_dim, int64_t inner_fragments, int64_t outer_fragments,
                  int64_t outer_step, const std::function<Element(int warp)>& warp_offset, int num_warps,
                  const std::string& what) {
  SCOPED_TRACE(what);
  const FragmentTiling tiles{f.regs(), inner_fragments};
  ASSERT_EQ(l.num_regs(), f.regs() * inner_fragments * outer_fragments);
  for (int w = 0; w < num_warps; ++w)
    for (int lane = 0; lane < 32; ++lane)
      for (int64_t outer = 0; outer < outer_fragments; ++outer)
        for (int64_t inner = 0; inner < inner_fragments; ++inner)
          for (int j = 0; j < f.regs(); ++j) {
            auto [row, col] = f.element(0, lane, j);
            const int64_t in_off = inner * f.extent(inner_dim), out_off = outer * outer_step;
            (inner_dim == 1 ? col : row) += in_off;
            (inner_dim == 1 ? row : col) += out_off;
            const Element wo = warp_offset(w);
            const int r = static_cast<int>(tiles.first_register(inner, outer)) + j;
            EXPECT_EQ(at(l, w, lane, r), (Element{row + wo.first, col + wo.second}))
                << "warp " << w << " lane " << lane << " fragment (" << outer << ", " << inner << ") register " << j;
          }
}

TEST(MmaShape, LayoutsAreTilesOfTheFragmentsInTheEmittersRegisterOrder) {
  // 128 x 64 over 4 x 2 warps: warp (wm, wn) = (w % 4, w / 4) holds rows 16 wm + 64 mt, columns 32 wn + ...
  const WarpSplit ws{4, 2, 8};
  auto warp_m = [](int w) { return Element{16 * (w % 4), 0}; };
  auto warp_mn = [](int w) { return Element{16 * (w % 4), 32 * (w / 4)}; };
  auto warp_n = [](int w) { return Element{0, 32 * (w / 4)}; };
  const MmaShape& h = mma_sync_shape(DType::f16);
  expect_tiles(mma_acc_layout(128, 64, ws), h.c, 1, 32 / 8, 128 / 64, 64, warp_mn, 8, "accumulator");
  expect_tiles(mma_a_layout(128, 32, ws), h.a, 1, 32 / 16, 128 / 64, 64, warp_m, 8, "f16 A");
  expect_tiles(mma_b_layout(32, 64, ws), h.b, 0, 32 / 16, 32 / 8, 8, warp_n, 8, "f16 B");
  const MmaShape& t = mma_sync_shape(DType::f32);
  expect_tiles(mma_a_layout(128, 32, ws, DType::f32), t.a, 1, 32 / 8, 128 / 64, 64, warp_m, 8, "tf32 A");
  expect_tiles(mma_b_layout(32, 64, ws, DType::f32), t.b, 0, 32 / 8, 32 / 8, 8, warp_n, 8, "tf32 B");
}

// One warpgroup's m64nN wgmma accumulator and register A are the mma.sync layouts of a 64-row tile over
// four warps along M: the rest of the kernel does not know which instruction produced the accumulator.
TEST(MmaShape, WgmmaFragmentsAreTheMmaLayoutsOfOneWarpgroup) {
  const WarpSplit warpgroup{4, 1, 4};
  for (int64_t n : {16, 64, 128, 256}) {
    const MmaShape s = wgmma_shape(n);
    const Layout acc = mma_acc_layout(64, n, warpgroup);
    EXPECT_EQ(s.c.reg, acc.reg) << n;
    EXPECT_EQ(s.c.lane, acc.lane) << n;
    EXPECT_EQ(s.c.warp, acc.warp) << n;
    EXPECT_EQ((FragmentTiling{s.c.regs(), 1}.first_register(int64_t{0}, 1)), n / 2) << "the next 64-row block";
  }
  const MmaShape s = wgmma_shape(64);
  const Layout a = mma_a_layout(64, 16, warpgroup);
  EXPECT_EQ(s.a.reg, a.reg);
  EXPECT_EQ(s.a.lane, a.lane);
  EXPECT_EQ(s.a.warp, a.warp);
}

TEST(MmaShape, FragmentTilingPrintsTheRegisterOfAFragment) {
  const FragmentTiling tiles{8, 4};
  EXPECT_EQ(tiles.first_register("kt", "mt"), "8 * (kt + 4 * mt)");
  EXPECT_EQ(tiles.first_register(int64_t{1}, int64_t{2}), 8 * (1 + 4 * 2));
}

} // namespace
} // namespace kiln
