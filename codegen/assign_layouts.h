// Pass: decide where every value lives before any CUDA is written.
//   - scalars are plain C++ variables, block pointers small structs;
//   - "flexible" tiles (constants, aranges, broadcasts, index arithmetic on them) are computed wherever
//     they are used, directly in the user's layout, so they never need a conversion;
//   - dot results take the mma accumulator layout; reductions the slice of their input; elementwise
//     ops the layout of their most constrained operand; loads a coalesced blocked layout;
//   - block-pointer loads used only as dot operands stay in (swizzled) shared memory, and those of a
//     loop-carried block pointer advanced by a loop-invariant step are pipelined num_stages deep.
#pragma once

#include "codegen/codegen.h"
#include "codegen/layout.h"
#include "codegen/target.h"

#include <map>
#include <unordered_map>
#include <unordered_set>

namespace kiln {

enum class Placement : uint8_t { Scalar, BlockPtr, Flexible, Registers, Shared, None };

// A block-pointer load kept in shared memory: `rows` x `cols` in memory order (cols contiguous).
struct SharedTile {
  ValueId value = kNoValue;
  const Op* load = nullptr;
  int64_t rows = 0, cols = 0;
  int elem_bytes = 2;
  int contig_dim = 1; // the logical dim of the loaded block that is contiguous in memory
  int stages = 1;     // ring depth when pipelined
  int64_t offset = 0; // bytes from the start of dynamic shared memory
  const Op* loop = nullptr;           // the innermost for op around the load (nullptr: none)
  std::vector<const Op*> loop_nest;   // every for op around the load, outermost first
  
  int64_t bytes_per_stage() const { return rows * cols * elem_bytes; }
};

struct LoweringPlan {
  std::unordered_map<ValueId, Placement> placement;
  std::unordered_map<ValueId, Layout> layout; // Registers values
  std::vector<SharedTile> tiles;
  std::unordered_map<ValueId, int> tile_of;     // Shared values -> tiles index (through trans too)
  std::unordered_map<ValueId, bool> transposed; // Shared values reached through an odd number of trans
  std::map<const Op*, std::vector<const Op*>> pipelined; // for op -> its pipelined loads, in order
  WarpSplit warps;
  int num_warps = 4;
  int64_t tiles_bytes = 0; // shared memory for tiles; scratch follows

  Placement where(ValueId v) const { return placement.at(v); }
  // The logical dim of shared value `v` that is contiguous in shared memory (its tile's, flipped by an
  // odd number of trans).
  int contiguous_dim(ValueId v) const {
    const SharedTile& t = tiles[tile_of.at(v)];
    return transposed.at(v) ? 1 - t.contig_dim : t.contig_dim;
  }
};

LoweringPlan assign_layouts(const Kernel& k, const Target& target, const CodegenOptions& options);

// Pass: lay the shared tiles out (1024-byte aligned); returns the bytes used. A loop's tiles are dead once it
// ends, so sibling loops (top-level or nested in the same loop) share space, while a tile loaded in a loop's
// own body stays clear of the loops nested in it.
int64_t plan_shared_memory(LoweringPlan& plan);

} // namespace kiln
