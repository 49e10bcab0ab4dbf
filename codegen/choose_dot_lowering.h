// Pass: the instruction every dot lowers to, recorded in the plan (LoweringPlan::dots):
//   - wgmma on sm_90a where its operands allow it (codegen/wgmma.h says when, and why not otherwise);
//   - mma.sync for f16/bf16 (and f32 asking for tf32) whose result took the mma accumulator layout;
//   - per-thread FMA from shared memory for everything else (exact f32/f64, tensor cores switched off, and dots
//     below the tensor cores' 16 x 16 x 16 tile in any dim, whose result then takes a plain blocked layout).
// First, a shared tile whose 128-byte lines keep a dot off wgmma (a warpgroup's slice of an N-major B narrower than a
// line) is stored in lines of the slice's width, where that puts the dot on wgmma and takes it from no other.
// And the fused casts: an f32 -> f16/bf16 cast of a register tile read only as a dot's A operand is packed
// into the fragment straight from f32 instead of being materialised (FA2's P, the backward's Pᵀ and dSᵀ).
#pragma once

#include "codegen/codegen.h"
#include "codegen/lowering_plan.h"
#include "codegen/target.h"

namespace kiln {

// Whether `dot` has M, N or K below 16, the smallest tile of the tensor-core instructions: it runs on FMA, in
// any dtype (assign_layouts gives its result the default layout, not an mma accumulator's).
bool dot_below_mma_tile(const Kernel& k, const Op& dot);

void choose_dot_lowering(const Kernel& k, const Target& target, const CodegenOptions& options,
                         LoweringPlan& plan);

} // namespace kiln
