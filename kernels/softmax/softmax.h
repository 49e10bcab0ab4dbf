// Row softmax (Triton tutorial 02): out[r, :] = softmax(in[r, :]), ROWS rows a program, each whole row
// in one (ROWS, BLOCK) tile of BLOCK ≥ n_cols columns, computed in f32.
//
// Args: out, in (pointers of the DTYPE element type), in_row_stride, out_row_stride (i64, in
// elements; columns are contiguous), n_rows, n_cols (i32).
// Params: BLOCK (power of two ≥ n_cols), ROWS (power of two, default 1), DTYPE (kernels/dtype_param.h: 0 f16,
// 1 bf16, 2 f32, the default),
// MIN_BLOCKS_PER_SM (register cap, default 1). Grid: (cdiv(n_rows, ROWS), 1, 1).
#pragma once

#include "kernels/executor.h"

#include "dsl/host_buffer.h"
#include "dsl/registry.h"

#include <vector>

namespace kiln {

Kernel build_softmax(const Config& config);
KernelDef softmax_def();

// ---- host side: a problem, its reference and an interpreted run ----
struct SoftmaxProblem {
  int64_t n_rows = 1, n_cols = 1;
  DType dtype = DType::f32;
  int64_t in_row_stride = 0, out_row_stride = 0; // 0 → n_cols (dense rows)
  int64_t in_stride() const { return in_row_stride ? in_row_stride : n_cols; }
  int64_t out_stride() const { return out_row_stride ? out_row_stride : n_cols; }
};

// The config a host op uses: BLOCK the next power of two ≥ n_cols, warps by row length.
Config softmax_config(const SoftmaxProblem& p);
// Random input rows in [-scale, scale] of the problem's dtype (padding between rows random too).
HostBuffer make_softmax_input(const SoftmaxProblem& p, uint64_t seed, double scale);
// Row softmax in double precision from the (rounded) input; dense [n_rows, n_cols].
std::vector<double> softmax_reference(const SoftmaxProblem& p, const HostBuffer& in);
// Runs the kernel in the interpreter into an output poisoned with NaN; returns it dense [n_rows, n_cols].
std::vector<double> run_softmax_interpreted(const SoftmaxProblem& p, const Config& config, const HostBuffer& in,
                                            Executor executor = Executor::Interpreter);

} // namespace kiln
