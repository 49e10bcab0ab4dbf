// Attention backward, step 1: Delta[b, h, i] = Σ_d dO[b, h, i, d] · O[b, h, i, d] in f32, the row term of
// dS = P ∘ (dP − Delta). One program per (BLOCK_M query rows, batch·head). With ATOMIC_DQ=1 it also zeroes
// those rows of the f32 dQ accumulator that fa2_bwd_dkdv adds into.
//
// Args: the backward list (attention_bwd_args.h). Params: BLOCK_M, HEAD_DIM, EVEN_D, DTYPE, ATOMIC_DQ (the
// attention params, of which the others are ignored). Grid: (cdiv(N_Q, BLOCK_M), B·H, 1).
#pragma once

#include "dsl/registry.h"

namespace kiln {

Kernel build_fa2_bwd_preprocess(const Config& config);
const KernelDef& fa2_bwd_preprocess_def(); // built once per process

} // namespace kiln
