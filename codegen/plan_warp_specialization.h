// Pass: warp specialisation (WarpSpecialization in codegen/lowering_plan.h). Runs after plan_tma_copies.
//
// A config asks for it with WARP_SPECIALIZE=1. It is done when the target is sm_90a, CodegenOptions allow it,
// the kernel's warps form whole warpgroups, and its pipelined loops (one or more: FA2 has an unmasked and a
// masked key loop) are all at the top of the kernel (not inside another loop or an if), all copied by TMA, and
// all fill one ring: the same tiles a stage in the same bytes, the same stages, no other tile in those bytes.
// Every scalar their bounds, block pointers and advances need must be computed at the top of the kernel before
// the last loop from parameters, program ids, arithmetic and scalar loads of tensors the kernel never writes
// (a block mask's counts and first and last tiles), or be a block pointer an earlier loop carried (the
// producer recomputes them). Tiles loaded before a loop are then waited for where the
// consumers issue them. Otherwise WarpSpecialization::why_not says which of these failed and the kernel is
// generated as before.
//
// Registers: the kernel's entry register count is what __launch_bounds__(consumers + 128, MIN_BLOCKS_PER_SM)
// leaves a thread (in multiples of 8); the producer releases down to 56 and the consumers take what it
// released, in multiples of 8 and at most 240. Where the cap at entry is already 255 (few threads), or the
// consumers would gain nothing, registers are not moved.
#pragma once

#include "codegen/codegen.h"
#include "codegen/lowering_plan.h"

namespace kiln {

void plan_warp_specialization(const Kernel& k, const Target& target, const CodegenOptions& options,
                              LoweringPlan& plan);

// The setmaxnreg targets for `consumer_threads` consumers beside a 128-thread producer, `blocks` CTAs an SM,
// the producer drawing the programs of a dynamic persistent grid or not (fills entry/producer/consumer_registers
// of `ws`; all zero when registers are not moved).
void plan_register_reallocation(int consumer_threads, int blocks, bool producer_draws_programs,
                                WarpSpecialization& ws);

} // namespace kiln
