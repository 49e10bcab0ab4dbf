// Matrix multiply C = A @ B (Triton tutorial 03) over block pointers: A (M, K) and B (K, N) with
// arbitrary strides, an f32 accumulator, and grouped program ordering for L2 reuse.
//
// Args: A, B, C (pointers of the DTYPE element type), M, N, K (i32), stride_am, stride_ak,
// stride_bk, stride_bn, stride_cm, stride_cn (i64, in elements).
// Params: BLOCK_M, BLOCK_N, BLOCK_K (powers of two ≥ 16), GROUP_M (rows of tiles per group),
// DTYPE (0 f16, 1 bf16, 2 f32), TF32 (f32 only: tensor-core tf32 products), A_COL_MAJOR / B_COL_MAJOR
// (which dim of A / B is contiguous in memory; any strides give correct results, the flag tells the
// code generator the order to vectorise along).
// Grid: (cdiv(M, BLOCK_M) * cdiv(N, BLOCK_N), 1, 1).
#pragma once

#include "kernels/executor.h"

#include "dsl/host_buffer.h"
#include "dsl/registry.h"

#include <vector>

namespace kiln {

Kernel build_matmul(const Config& config);
KernelDef matmul_def();

// ---- host side ----
struct MatmulProblem {
  int64_t M = 1, N = 1, K = 1;
  DType dtype = DType::f16;
  bool tf32 = false;
  bool a_col_major = false, b_col_major = false; // C is always row-major
};

// Strides in elements of A (M, K), B (K, N) and C (M, N).
struct MatmulStrides {
  int64_t am = 0, ak = 0, bk = 0, bn = 0, cm = 0, cn = 0;
  // Densely packed A and B in the problem's layouts, row-major C.
  static MatmulStrides packed(const MatmulProblem& p);
};

struct MatmulInputs {
  HostBuffer a, b;
};

Config default_matmul_config(const MatmulProblem& p);
// A and B, random in [-scale, scale], stored as the problem's layouts say.
MatmulInputs make_matmul_inputs(const MatmulProblem& p, uint64_t seed, double scale);
// C = A @ B in double precision from the (rounded) inputs; row-major [M, N].
std::vector<double> matmul_reference(const MatmulProblem& p, const MatmulInputs& in);
// Runs the kernel in the interpreter into a C poisoned with NaN; returns C row-major [M, N].
std::vector<double> run_matmul_interpreted(const MatmulProblem& p, const Config& config, const MatmulInputs& in,
                                           Executor executor = Executor::Interpreter);

} // namespace kiln
