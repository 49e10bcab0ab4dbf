// The DSL pieces matmul and its split-K variant share: the tile params, the grouped order in which programs
// take output tiles (L2 reuse), and the product of one output tile over a range of the reduction dim.
#pragma once

#include "dsl/config.h"
#include "dsl/dsl.h"

#include <llvm/ADT/SmallVector.h>

namespace kiln {

struct MatmulTileParams {
  int64_t block_m = 0, block_n = 0, block_k = 0, group_m = 1;
  DType dtype = DType::f16;
  bool tf32 = false;
  // Dims fastest-varying first: (1, 0) row-major, (0, 1) column-major.
  llvm::SmallVector<int, 2> a_order, b_order;
};

// Reads and checks BLOCK_M/N/K, GROUP_M, DTYPE, TF32, A_COL_MAJOR, B_COL_MAJOR; `kernel` names the kernel in
// errors.
MatmulTileParams matmul_tile_params(const Config& config, const char* kernel);

// The operands of A (M, K) @ B (K, N), as kernel arguments.
struct MatmulOperands {
  Value a, b;
  Value M, N, K;
  Value stride_am, stride_ak, stride_bk, stride_bn;
};

// The output tile a program computes, in tiles.
struct OutputTile {
  Value pid_m, pid_n;
};

// Grouped ordering: consecutive tile ids walk GROUP_M rows of tiles down a column of tiles, so that the B tiles
// they share stay in L2.
OutputTile grouped_output_tile(const Value& tile_id, const Value& M, const Value& N, const MatmulTileParams& tp);

// The f32 (BLOCK_M, BLOCK_N) tile of A[:, k_lo:k_hi] @ B[k_lo:k_hi, :] at `tile`, K tiles past K read as zero.
Value matmul_tile_product(const MatmulOperands& ops, const OutputTile& tile, const Operand& k_lo,
                          const Operand& k_hi, const MatmulTileParams& tp);

// Every output tile: cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N).
int64_t matmul_output_tiles(const Config& config, int64_t M, int64_t N);

} // namespace kiln
