// Split-K matmul: for products whose output has too few tiles to fill the GPU (1024 x 1024 x 16384 is 64 tiles
// of 128 x 128 for 132 SMs), the reduction dim is cut into SPLIT_K ranges. Two kernels, both DSL programs:
//
//   matmul_split_k         program (split, tile) writes A[:, ks] @ B[ks, :] for its range ks of K to the f32
//                          workspace W[split] (W is [SPLIT_K, M, N], contiguous);
//   matmul_split_k_reduce  C = sum over split of W[split], added in split order and rounded once to C's dtype.
//
// The sum's order is fixed, so results are deterministic (no atomics), and equal to the one-kernel matmul's up
// to the order of f32 additions. kernels/matmul/matmul_launch.h chooses between the two paths.
//
// matmul_split_k args: A, B, W (f32), M, N, K (i32), stride_am, stride_ak, stride_bk, stride_bn (i64, in
// elements). Params: matmul's, plus SPLIT_K. Grid: (SPLIT_K * cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N), 1, 1), split
// major, so that the persistent and warp-specialised paths see one program axis.
// matmul_split_k_reduce args: W (f32), C, M, N (i32), stride_cm, stride_cn (i64). Params: BLOCK_M, BLOCK_N,
// SPLIT_K, DTYPE (C's). Grid: (cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N), 1, 1).
#pragma once

#include "dsl/registry.h"
#include "kernels/executor.h"
#include "kernels/matmul/matmul.h"

#include <vector>

namespace kiln {

Kernel build_matmul_split_k(const Config& config);
KernelDef matmul_split_k_def();

Kernel build_matmul_split_k_reduce(const Config& config);
KernelDef matmul_split_k_reduce_def();

// The range of K each split covers: cdiv(cdiv(K, BLOCK_K), SPLIT_K) tiles of BLOCK_K (the last split may
// cover less, or nothing when there are more splits than K tiles).
int64_t split_k_range(int64_t K, int64_t block_k, int64_t split_k);

// Runs the pair in the interpreter (or on the GPU) into a W and a C poisoned with NaN; returns C row-major
// [M, N]. `partial` and `reduce` must agree on SPLIT_K.
std::vector<double> run_matmul_split_k_interpreted(const MatmulProblem& p, const Config& partial,
                                                   const Config& reduce, const MatmulInputs& in,
                                                   Executor executor = Executor::Interpreter);

} // namespace kiln
