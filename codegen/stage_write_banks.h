// How the threads write a register tile to a bulk-reduction stage (plan_bulk_reductions): which registers go out as
// one 8-byte store, and in which order each lane takes its registers, so that one warp's stores spread over the 32
// banks of shared memory.
//
// Where the stage's rows lie back to back as in the tensor (one bulk reduction adds the whole block), a row is a whole
// number of bank cycles when it is a multiple of 32 f32 (FA2's dQ: 64). A wgmma accumulator gives the eight lanes of
// a column of lanes eight rows of the same columns, and in the stage those rows fall on the same banks: each store
// instruction of a warp is an 8-way conflict (8 wavefronts where 1 would do; an H200's fused dK/dV spends about 11 %
// of its time there, worklog §100). Where a lane's registers also cover other columns, the lane can write them in
// another order: in instruction j a lane writes register j ^ rot(lane), where rot(lane) XORs a register mask for each
// lane bit set, so that the lanes of different rows write different columns in the same instruction. Every lane
// still writes each of its registers once: the order is a permutation. The registers are permuted by selects
// (w[j] = x[j ^ rot], one select per register and mask bit), never by a register index known only at run time.
#pragma once

#include "codegen/layout.h"
#include "codegen/shared_tile_geometry.h"

#include <cstdint>
#include <string>
#include <vector>

namespace kiln {

struct StageWrites {
  int vector = 1;               // f32 registers per store: 2 where register bit 0 is the next column
  std::vector<int> lane_masks;  // per lane bit (5): the register-index XOR mask a lane with that bit set applies
  int64_t wavefronts = 0;       // one warp's shared-memory wavefronts for the whole tile, in this order
  int64_t wavefronts_plain = 0; // the same, each lane taking its registers in order
  // In the shared format, where each register bit moves the element by whole 16-byte chunks within its line, whole
  // panels or whole swizzle periods of rows: register r's byte offset is register 0's (the lane's) with the XOR of
  // chunk_xor[b] and then the sum of byte_add[b] over r's bits b, so that a lane computes one offset and each store
  // adds constants. Empty where some bit moves the element otherwise (each register's place is computed whole).
  std::vector<int64_t> chunk_xor, byte_add;
  bool by_register_bits() const { return !chunk_xor.empty(); }
  bool rotated() const;         // some lane applies a mask
  std::string str() const;      // "8-byte stores, each lane's registers rotated by lane bit 2 (register ^ 4) lane
                                // bit 3 (register ^ 8): 16 shared-memory wavefronts a warp (64 in order)"
};

// The writes of tile layout `L` to a stage whose element (row, col) lies at row * row_stride + col f32 (row_dim < 0:
// a rank-1 block, row 0), or, given `format`, where that tile of kiln's shared format holds it (a TMA reduction's
// stage: its swizzle already spreads a warp's rows over the banks). `rotate`: look for lane masks that take fewer
// wavefronts (CodegenOptions::rotated_stage_writes), keeping each only where it lowers the count.
StageWrites plan_stage_writes(const Layout& L, int row_dim, int col_dim, int64_t row_stride, bool rotate,
                              const SharedTileGeometry* format = nullptr);

} // namespace kiln
