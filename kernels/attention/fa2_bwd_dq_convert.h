// Attention backward, atomic variant's last step: dQ = DQ_ACC · sm_scale in the input dtype, where DQ_ACC
// is the f32 accumulator fa2_bwd_dkdv (ATOMIC_DQ=1) added into. One program per (BLOCK_M query rows,
// batch·head).
//
// Args: the backward list (attention_bwd_args.h). Params: BLOCK_M, HEAD_DIM, EVEN_D, DTYPE (the attention
// params; the others are ignored). Grid: (cdiv(N_Q, BLOCK_M), B·H, 1).
#pragma once

#include "dsl/registry.h"

namespace kiln {

Kernel build_fa2_bwd_dq_convert(const Config& config);
const KernelDef& fa2_bwd_dq_convert_def(); // built once per process

} // namespace kiln
