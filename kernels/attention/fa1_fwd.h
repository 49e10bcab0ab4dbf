// FlashAttention (v1) forward, the paper's Algorithm 1: one program per (batch, head); the outer loop
// walks K/V tiles, the inner loop walks Q tiles, and each (Q tile, K/V tile) step reads the running
// output, row sum and row max from global memory, updates them, and writes them back. A last pass
// normalises into O and writes LSE. It is the baseline FA2 improves on (FA2 keeps that state in
// registers by swapping the loops).
//
// Args: those of fa2_fwd (see fa2_fwd.h), in the same order, then three f32 scratch buffers the
// kernel initialises itself: OACC [B, H, N_Q, HEAD_DIM] (unnormalised output), L and M [B, H, N_Q]
// (row sum and log2-domain row max), all contiguous.
// Params: those of fa2_fwd (BLOCK_M, BLOCK_N, HEAD_DIM, EVEN_D, CAUSAL, K_TRANSPOSED, DTYPE, TF32).
// Grid: (B·H, 1, 1).
//
// Within one program a Q tile's scratch rows are written at one K/V step and read at the next, by
// other threads of the same program: generated code needs a CTA barrier between a program's global
// stores and its later loads of the same buffer.
#pragma once

#include "dsl/registry.h"

namespace kiln {

Kernel build_fa1_fwd(const Config& config);
const KernelDef& fa1_fwd_def(); // built once per process

} // namespace kiln
