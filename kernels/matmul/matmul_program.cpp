#include "kernels/matmul/matmul_program.h"

#include "kernels/dtype_param.h"

#include <fmt/format.h>

namespace kiln {

MatmulTileParams matmul_tile_params(const Config& config, const char* kernel) {
  MatmulTileParams tp;
  tp.block_m = config.get("BLOCK_M");
  tp.block_n = config.get("BLOCK_N");
  tp.block_k = config.get("BLOCK_K");
  tp.group_m = config.get("GROUP_M");
  tp.dtype = dtype_from_param(config.get("DTYPE"), kernel);
  tp.tf32 = config.get("TF32") != 0;
  static_check(!tp.tf32 || tp.dtype == DType::f32,
               fmt::format("TF32=1 multiplies f32 inputs in tf32 and needs DTYPE=2 (f32), but DTYPE={} ({})",
                           config.get("DTYPE"), dtype_name(tp.dtype)));
  static_check(tp.group_m >= 1, "GROUP_M must be at least 1");
  tp.a_order = config.get_or("A_COL_MAJOR", 0) ? llvm::SmallVector<int, 2>{0, 1} : llvm::SmallVector<int, 2>{1, 0};
  tp.b_order = config.get_or("B_COL_MAJOR", 0) ? llvm::SmallVector<int, 2>{0, 1} : llvm::SmallVector<int, 2>{1, 0};
  return tp;
}

OutputTile grouped_output_tile(const Value& tile_id, const Value& M, const Value& N, const MatmulTileParams& tp) {
  Value num_pid_m = cdiv(M, tp.block_m), num_pid_n = cdiv(N, tp.block_n);
  Value num_pid_in_group = tp.group_m * num_pid_n;
  Value group_id = tile_id / num_pid_in_group;
  Value first_pid_m = group_id * tp.group_m;
  Value group_size_m = minimum(num_pid_m - first_pid_m, tp.group_m);
  Value pid_m = (first_pid_m + (tile_id % num_pid_in_group) % group_size_m).named("pid_m");
  Value pid_n = ((tile_id % num_pid_in_group) / group_size_m).named("pid_n");
  return OutputTile{pid_m, pid_n};
}

Value matmul_tile_product(const MatmulOperands& ops, const OutputTile& tile, const Operand& k_lo,
                          const Operand& k_hi, const MatmulTileParams& tp) {
  const int64_t BM = tp.block_m, BN = tp.block_n, BK = tp.block_k;
  Value a_ptr = make_block_ptr(ops.a, {ops.M, ops.K}, {ops.stride_am, ops.stride_ak}, {tile.pid_m * BM, k_lo},
                               {BM, BK}, tp.a_order)
                    .named("a_ptr");
  Value b_ptr = make_block_ptr(ops.b, {ops.K, ops.N}, {ops.stride_bk, ops.stride_bn}, {k_lo, tile.pid_n * BN},
                               {BK, BN}, tp.b_order)
                    .named("b_ptr");
  Value acc = zeros({BM, BN}, f32).named("acc"); // (BM, BN) f32
  for_range(k_lo, k_hi, BK, [&](Value) {
    Value a = load(a_ptr, BoundaryCheck{0, 1}); // (BM, BK), zero past M and K
    Value b = load(b_ptr, BoundaryCheck{0, 1}); // (BK, BN), zero past K and N
    acc = dot(a, b, acc, tp.tf32);
    a_ptr = advance(a_ptr, {0, BK});
    b_ptr = advance(b_ptr, {BK, 0});
  });
  return acc;
}

int64_t matmul_output_tiles(const Config& config, int64_t M, int64_t N) {
  const int64_t bm = config.get("BLOCK_M"), bn = config.get("BLOCK_N");
  return ((M + bm - 1) / bm) * ((N + bn - 1) / bn);
}

} // namespace kiln
