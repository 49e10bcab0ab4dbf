// Pass: some of an exp2 tile's registers computed on the FMA pipe (Exp2OnFma in codegen/lowering_plan.h).
// Runs after assign_layouts; reads placements and layouts only.
//
// A config asks for it with EXP2_ON_FMA=K (kernels/codegen_params.h). The multi-function unit that runs
// ex2.approx gives an SM 16 results a clock, the FMA pipe 128 fused multiply-adds; at D = 64 an attention
// step has as many exponentials as its products take tensor-core clocks. FlashAttention-4 therefore computes
// part of each tile's exponentials with a polynomial (kiln's: kiln::ex2_fma, 16 arithmetic PTX instructions,
// codegen/prelude/kiln_ex2_fma.cuh). Every f32 exp2 whose result is a register tile of at least
// K registers a thread is split: register r by the polynomial where r % K == K - 1, by ex2.approx elsewhere
// (r is a constant of the unrolled loop, so each register's choice is made at compile time). Where the config
// asks and no exp2 matches, Exp2OnFma::why_not says so. On the H200 every K measured slower (worklog §76):
// kiln's softmax is bound by issue slots, not by the unit, so no tuning space offers it.
#pragma once

#include "codegen/lowering_plan.h"
#include "dsl/ir.h"

namespace kiln {

void plan_exp2_on_fma(const Kernel& k, LoweringPlan& plan);

} // namespace kiln
