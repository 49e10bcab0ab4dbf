// The tensor-core instructions kiln issues, as data: for each, where every element of its A, B and C fragments
// lives, as the PTX ISA's fragment figures draw it ("Matrix Fragments for mma.m16n8k16", "... mma.m16n8k8" for
// tf32, "Register Fragments and Shared Memory Matrix Layouts" of wgmma .m64nNk16). A fragment is linear over
// bits, as kiln's layouts are (layout.h): the (row, col) of an element is the sum of one basis per set bit of
// the thread's register index, of its lane id and of its warp's index among the warps that issue the
// instruction together (a warpgroup's four for wgmma).
//
// The one owner of these facts: layout.cpp builds the mma layouts of whole tiles from the fragments
// (tile_register_bases), and the emitters (emit_dot.cpp) find each instruction's registers in a tile's register
// array by the same numbering (FragmentTiling).
#pragma once

#include "codegen/layout.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace kiln {

struct Fragment {
  int64_t rows = 0, cols = 0;
  std::vector<Coord> reg;  // (row, col) added by bit b of the thread's register index
  std::vector<Coord> lane; // by bit b of the lane id (5 bits)
  std::vector<Coord> warp; // by bit b of the warp's index among the instruction's warps (none for mma.sync)

  int regs() const { return 1 << reg.size(); }
  // The part of register r's (row, col) that does not depend on the thread.
  std::pair<int64_t, int64_t> reg_offset(int r) const;
  // The (row, col) that register r of lane `lane` of the instruction's warp `warp` holds.
  std::pair<int64_t, int64_t> element(int warp, int lane, int r) const;
  // The extent along dim 0 (rows) or 1 (cols).
  int64_t extent(int dim) const { return dim == 0 ? rows : cols; }
};

enum class MmaInstruction : uint8_t {
  MmaSyncM16N8K16,    // mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}: one warp
  MmaSyncM16N8K8Tf32, // mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32: one warp
  WgmmaM64NK16,       // wgmma.mma_async.sync.aligned.m64nNk16.f32.{f16,bf16}: one warpgroup, A from registers
};

struct MmaShape {
  MmaInstruction instruction = MmaInstruction::MmaSyncM16N8K16;
  int64_t m = 0, n = 0, k = 0;
  int warps = 1;                 // warps issuing one instruction together
  int elements_per_register = 2; // A and B elements packed in one 32-bit register (2 halves, or one tf32)
  Fragment a, b, c;              // a: m x k, b: k x n (wgmma reads B from shared memory: b is empty), c: m x n

  std::string name() const; // "mma.sync.m16n8k16", "mma.sync.m16n8k8.tf32", "wgmma.m64n64k16"
  // The fragment registers packed into 32-bit register i of an A (or B) operand.
  std::vector<int> packed_registers(int i) const;
};

// mma.sync for operands of dtype `in`: m16n8k16 for f16 and bf16, m16n8k8 (tf32) for f32.
const MmaShape& mma_sync_shape(DType in);
// wgmma m64nNk16 (f16, bf16) for N = `n`, a multiple of 8 from 8 to 256; A from registers.
MmaShape wgmma_shape(int64_t n);

// The register bases of one warp's (or warpgroup's) share of a tile made of fragments of `f`: the fragment's
// own register bits lowest, then the index of the fragment along `inner_dim` (covering `inner_extent`), then
// along the other dim (covering `outer_extent`), whose fragments are `outer_interleave` fragment extents apart
// (the warps that split that dim interleave at fragment granularity). FragmentTiling numbers them the same way.
std::vector<Coord> tile_register_bases(const Fragment& f, int inner_dim, int64_t inner_extent,
                                       int64_t outer_extent, int64_t outer_interleave);

// Where the fragment of one instruction sits in a tile's register array built by tile_register_bases: its
// register j is first_register(inner, outer) + j, for the fragment `inner` along the inner dim and `outer`
// along the other.
struct FragmentTiling {
  int fragment_regs = 0;
  int64_t inner_fragments = 1; // fragments along the inner dim

  int64_t first_register(int64_t inner, int64_t outer) const {
    return fragment_regs * (inner + inner_fragments * outer);
  }
  // The same as a C++ expression of the generated code's loop variables: "8 * (kt + 4 * mt)".
  std::string first_register(const std::string& inner, const std::string& outer) const;
};

} // namespace kiln
