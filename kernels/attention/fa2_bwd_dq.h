// Attention backward, step 3 (deterministic): dQ of one query tile, with no atomics. One program per
// (BLOCK_M query rows, batch·head) walks the key tiles its rows see, as the forward does (unmasked tiles,
// then the tiles that cross the causal diagonal or N_K), recomputing P and dP:
//   S = Q Kᵀ, P = exp2(S · scale · log2 e − LSE · log2 e), dP = dO Vᵀ, dS = P ∘ (dP − Delta), dQ += dS K
// and stores dQ · sm_scale. fa2_bwd_dq_convert is the atomic variant's last step instead.
//
// Args: the backward list (attention_bwd_args.h). Params: the attention params. Grid: (cdiv(N_Q, BLOCK_M),
// B·H, 1).
#pragma once

#include "dsl/registry.h"

namespace kiln {

Kernel build_fa2_bwd_dq(const Config& config);
const KernelDef& fa2_bwd_dq_def(); // built once per process

} // namespace kiln
