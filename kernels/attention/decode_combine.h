// Split-KV decoding, second kernel: merges the splits' partial results (decode_split.h) by their LSE into O
// (in the inputs' dtype) and the final LSE. For each row (b, h, i), with LSE_s in the log2 domain:
//
//   M = max_s LSE_s,  w_s = 2^(LSE_s − M),  O = Σ_s w_s · O_s / Σ_s w_s,  LSE = (M + log2 Σ_s w_s) · ln 2,
//
// taken online over the splits in order (deterministic, no atomics). Splits that saw no key (LSE_s = −inf)
// weigh nothing; a row no split saw gets O = 0 and LSE = −inf, and a NaN anywhere in a row's splits makes its
// O and LSE NaN (docs/guarantees.md).
//
// Args: O_PART, LSE_PART (f32, as decode_split writes them), O (DTYPE pointer, [B, N_Q, H, D] through its
// strides), LSE (f32 [B, H, N_Q] contiguous), B, H, N_Q, D, NUM_SPLITS (i32), stride_ob, stride_on, stride_oh
// (i64). Params: BLOCK_M (rows a program), HEAD_DIM, EVEN_D, DTYPE. Grid: (cdiv(B·H·N_Q, BLOCK_M), 1, 1).
#pragma once

#include "dsl/registry.h"

namespace kiln {

Kernel build_decode_combine(const Config& config);
const KernelDef& decode_combine_def(); // built once per process

} // namespace kiln
