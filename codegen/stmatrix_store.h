// Whether a register tile of 16-bit elements can be written to a row-major shared tile (dim 0 the rows, dim 1
// contiguous, in 16-byte chunks: SharedTileGeometry) by `stmatrix` (sm_90), and how.
//
// stmatrix.sync.aligned.m8n8.xN.shared.b16 stores N 8x8 matrices: lane l gives one 32-bit register a matrix (row
// l/4, elements 2(l%4) and 2(l%4)+1: one register pair of an mma accumulator) and lanes 8i..8i+7 give the
// addresses of rows 0..7 of matrix i (16 contiguous bytes each). With .trans each matrix is stored transposed, so
// a fragment whose lanes run along the tile's columns (dSᵀ's accumulator read as dS) lands as rows. One
// instruction then replaces 8 scalar 16-bit stores (and their packing), each of a matrix's 8 rows one 16-byte
// chunk: the fused backward staged dS for dQ's product with 32 `st.shared.u16` a thread a step (worklog §101).
#pragma once

#include "codegen/layout.h"

#include <optional>
#include <string>

namespace kiln {

struct StmatrixStore {
  bool trans = false; // the fragment's lanes run along the tile's columns
  int matrices = 4;   // per instruction (x4, x2, x1): register pairs 2(m..m+matrices-1) of one instruction
  int instructions = 0;
  std::string str() const; // "4 stmatrix.x4.trans a thread"
};

// `L` over (rows, cols) of `elem_bytes`-byte elements (2, or empty): register bit 0 and lane bits 0-4 must be one
// 8x8 fragment (either orientation), and every other register and warp basis a multiple of 8 along both dims (each
// pair of registers a whole matrix, matrices never overlapping within themselves). Empty when they are not.
std::optional<StmatrixStore> stmatrix_store(const Layout& L, int elem_bytes);

} // namespace kiln
