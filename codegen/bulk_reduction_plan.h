// What plan_bulk_reductions (codegen/plan_bulk_reductions.h) decides for each atomic_add through a block
// pointer (OpKind::AtomicAddBlock) and the emitter prints: the stage the block goes through, how the threads
// write it, and whether bulk reductions of the stage's rows or TMA tensor reductions of its panels add it to
// the tensor.
#pragma once

#include "codegen/shared_tile_geometry.h"
#include "codegen/stage_write_banks.h"
#include "dsl/ir.h"

#include <cstdint>
#include <map>
#include <string>

namespace kiln {

// One atomic_add added from a shared-memory stage by one bulk reduction a row, or by TMA reductions. The
// block's rows run along `col_dim` (its contiguous dim).
struct BulkReduction {
  int row_dim = -1; // -1: a rank-1 block, one row
  int col_dim = 0;
  int64_t rows = 1,
          cols = 0;   // the stage holds them back to back, cols f32 a row (by TMA: in kiln's shared format)
  StageWrites writes; // how the threads write the block to the stage (codegen/stage_write_banks.h)
  // By TMA: the stage is a tile of kiln's shared format (stage_format(): swizzled 128-byte panels) that one
  // thread adds to the tensor through tensor map `map` (an index into TmaPlan::maps), one tensor reduction a
  // panel; the map drops what lies past the tensor. -1: by bulk reductions of the stage's rows as they lie.
  int map = -1;
  std::string why_not_tma; // by bulk reductions: why not by TMA
  bool by_tma() const { return map >= 0; }
  SharedTileGeometry stage_format() const { return {rows, cols, 4, true, 128}; }
  int64_t panel_elems() const {
    return stage_format().line_bytes() / 4;
  } // f32 a panel's row (the box's inner dim)
  int panels() const { return static_cast<int>(cols / panel_elems()); }
};

struct BulkReductions {
  std::map<const Op*, BulkReduction> ops;
  std::map<const Op*, std::string> why_not; // the others: why they add element by element
  int64_t stage_offset = 0;                 // bytes from kiln_smem: after the tiles and the scratch
  int64_t stage_bytes = 0;                  // one stage's; 0 without bulk reductions
  // 2: the uses alternate between two stages, so that a use waits only for the reductions of the use before
  // the previous one, and passes one CTA barrier, not two; 1 where two stages do not fit.
  int stages = 1;
  bool any() const { return !ops.empty(); }
  int64_t end() const {
    return any() ? stage_offset + stages * stage_bytes : 0;
  } // shared bytes up to the end
};

} // namespace kiln
