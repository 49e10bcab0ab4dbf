// Distributed layouts: how a tile's elements are spread over a CTA's registers, lanes and warps.
//
// A layout is linear over bits (as Triton's linear layouts): element coordinates are the sum of one
// basis vector per set bit of the register index, of the lane id and of the warp id. A zero basis
// means replication (e.g. the lanes that hold the same row of a row vector). Blocked (coalesced),
// MMA accumulator, MMA operand and slice layouts are all built from bases, so that equality,
// slicing, broadcasting and coordinates are one piece of code for every kind.
#pragma once

#include "dsl/type.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln {

using Coord = llvm::SmallVector<int64_t, 3>;

// What a layout was made as. Decisions branch on it (an mma accumulator is what tensor cores produce; a
// slice can be broadcast back into its parent for free); the bases, not the kind, say where elements are.
enum class LayoutKind : uint8_t { Blocked, Mma, MmaA, MmaB, Slice };
const char* layout_kind_name(LayoutKind k); // "blocked", "mma", "mma_a", "mma_b", "slice"

struct Layout {
  Shape shape;
  std::vector<Coord> reg;  // basis of register bit b
  std::vector<Coord> lane; // basis of lane bit b (5 bits)
  std::vector<Coord> warp; // basis of warp bit b (log2 num_warps bits)
  LayoutKind kind = LayoutKind::Blocked;
  bool collapsed = false; // made by collapse_layout (a layout of another shape's size-1 dims dropped)
  // For a slice (a reduction's result): the layout it was reduced from and along which dim, so that
  // expanding it back and broadcasting lands in the parent for free. Not part of equality.
  std::shared_ptr<const Layout> parent;
  int parent_dim = -1;
  bool expanded = false; // the parent's dim has been re-inserted (size 1)

  int rank() const { return static_cast<int>(shape.size()); }
  int num_regs() const { return 1 << reg.size(); }
  // The compile-time part of register r's coordinate along `dim`.
  int64_t reg_offset(int r, int dim) const;
  // The element register r of lane `lane` in warp `warp` holds: the sum of the bases of their set bits.
  Coord element(int r, int lane, int warp = 0) const;
  bool same_bases(const Layout& o) const { return shape == o.shape && reg == o.reg && lane == o.lane && warp == o.warp; }
  std::string kind_name() const; // "mma", "blocked_collapsed", ...
  std::string str() const;       // "mma[128x64] regs=32"
  // The bases themselves, for telling apart two layouts whose str() agree:
  // "reg (0,1) (0,2) lane (0,4) (0,8) (0,16) (1,0) (2,0) warp (4,0) (8,0)".
  std::string bases_str() const;
};

// Coalesced layout: `vec` contiguous elements per thread along the fastest dim (order[0]), lanes then
// warps filling dims from fastest to slowest, the rest as further registers.
Layout blocked_layout(const Shape& shape, int num_warps, int vec, llvm::ArrayRef<int> order = {});
// The default register layout for a tile of `shape` and `elem` (16-byte vectors along the last dim).
Layout default_layout(const Shape& shape, DType elem, int num_warps);

// How a CTA's warps share an mma tile: warps_m x warps_n distinct tiles; when the tile is too small
// for every warp, the remaining warps (num_warps / (warps_m * warps_n)) hold replicas.
struct WarpSplit {
  int warps_m = 1, warps_n = 1, num_warps = 1;
};
// The f32 accumulator of mma.sync (and wgmma) for an (M, N) tile, built from the instructions' fragments
// (mma_shape.h).
Layout mma_acc_layout(int64_t M, int64_t N, const WarpSplit& w);
// mma.sync operand A (M, K) and B (K, N) layouts for the same warp split, for operands of dtype `in` (the
// m16n8k16 fragments for f16 and bf16, m16n8k8's for tf32 from f32). wgmma's register A is the f16 A layout.
Layout mma_a_layout(int64_t M, int64_t K, const WarpSplit& w, DType in = DType::f16);
Layout mma_b_layout(int64_t K, int64_t N, const WarpSplit& w, DType in = DType::f16);

// The layout of a reduction's result along `dim`: bases along dim dropped, registers that only moved
// along dim removed; lanes/warps that did become replicas.
Layout slice_layout(const Layout& parent, int dim);
// A size-1 dim inserted at `axis` (registers unchanged).
Layout expand_layout(const Layout& x, int axis);
// The inverse: dim `axis` (of size 1) dropped, registers unchanged (the layout an expand_dims reads its
// operand in, given the layout of its result). Kind and slice parent are kept.
Layout squeeze_layout(const Layout& x, int axis);
// The layout a broadcast of a value in `x` to `shape` gets for free: the slice's parent, if any.
std::optional<Layout> broadcast_parent(const Layout& x, const Shape& shape);
// x's dims permuted as trans does (registers unchanged).
Layout trans_layout(const Layout& x);
// If `src` is `dst` with the broadcast dims (dims of size 1 in src) collapsed, returns for each
// register of dst the register of src holding its value; empty when a conversion is needed first.
std::vector<int> broadcast_register_map(const Layout& src, const Layout& dst);
// The layout a broadcast source must have to broadcast into `dst` for free.
Layout collapse_layout(const Layout& dst, const Shape& src_shape);

// How many elements along `dim` one thread holds in consecutive registers: the lowest register bits step
// 1, 2, 4, ... along `dim` (and nowhere else); at most `max_run`.
int register_run(const Layout& x, int dim, int max_run);

// One exchange of a register bit with a lane bit (a butterfly between lanes lane ^ (1 << lane_bit)).
struct LaneRegisterSwap {
  int lane_bit = 0, reg_bit = 0;
};
// Widens x's register run along `dim` (register_run) towards `max_run` by exchanging register bits with the
// lane bits that continue it: where register bit k does not step 2^k along dim but a lane bit does, the two
// bases trade places. An mma accumulator, whose threads hold pairs of columns, becomes one whose threads hold
// 8-column runs, so that a 16-bit tile is stored in 16-byte pieces. Returns the new layout (the same elements,
// spread differently) and appends the exchanges, in the order they must be made, to `swaps`.
Layout widen_register_run(const Layout& x, int dim, int max_run, std::vector<LaneRegisterSwap>& swaps);

// Register bits of `x` whose bases move along `dim`, lane bits likewise, warp bits likewise.
struct ReductionPlan {
  std::vector<int> reg_bits, lane_bits, warp_bits;
};
ReductionPlan reduction_plan(const Layout& x, int dim);

} // namespace kiln
