// Pass: shared A operands of wgmma products read into registers once before a loop (RegisterOperands in
// codegen/lowering_plan.h). Runs last but one; changes no placement: the tile stays in shared memory for its
// other readers (dK/dV's K is also the B of the fused dQ = dS K).
//
// wgmma reads B from shared memory and A from shared memory or registers. A product m64nNk16 with both in shared
// memory reads 64 x 16 + 16 x N elements a warpgroup for 64 x N x 16 multiply-adds; at N = 64 (the backward's tiles
// at D = 64) that is as many shared-memory cycles as tensor-core cycles, so the products of a step that also stages
// its operands and reads dQ's narrow B wait on shared memory (worklog §103). An A that does not change inside the
// loop (the key tile's K in Sᵀ = K Qᵀ, V in dPᵀ = V dOᵀ) can be read into registers once, in wgmma's register-A
// fragment (mma.sync's A fragment for each warp's 16 rows: ldmatrix, as emit_dot_mma reads it), before the
// outermost loop in which it is the same; the products then read half the bytes.
//
// Taken for a 16-bit A in a shared tile that is not a ring's stage, is waited for where it is loaded (not one whose
// wait a later loop's first wait covers) and has no second buffer, read by wgmma products of one warp split inside a
// loop that does not define it, in a warp-specialised kernel whose consumers hold at least kMinConsumerRegisters
// registers (one CTA an SM). The two-CTA tiles' consumers hold 232, and there NVRTC 13.0's ptxas was caught
// miscompiling: on FA2's 64 x 64 warp-specialised tile at two CTAs an SM with LAZY_RESCALE=1 it gave the loop
// body's packed P the registers that held Q, so every key tile after the first multiplied by P (worklog §104;
// the PTX is right, the SASS is not). The floor keeps those tiles out, and tests/gpu/register_operands_gpu_test.cpp
// runs every shipped config the pass admits against the reference, since what ptxas allocates is a config's and
// not a shape's. The budget is per loop (the operands read before a loop are
// dead after it, so dK/dV's sibling query loops each take the same ones): each operand at most kMaxOperandRegisters
// registers a thread and those live in the loop kMaxRegisters (D = 64's K and V; at D = 128 each would take 32,
// which the tiles there do not have), and the loop's products' results and the operands leave a consumer
// kRegistersBesideProducts for everything else (the operands cast for the products, the softmax's temporaries,
// addresses). Offline (ptxas 13, D = 64): the 64-query steps of dK/dV's 128-key tile (products 144 and 128
// registers, operands 32, consumers 240) and dQ's tiles keep no spill; dK/dV's 128-query step (192) spilled 504
// bytes, which this keeps out. Every shared A of a product in such a loop left in shared memory is in
// RegisterOperands::why_not with the reason. CodegenOptions::register_operands off: none.
#pragma once

#include "codegen/codegen.h"
#include "codegen/lowering_plan.h"
#include "codegen/target.h"

namespace kiln {

constexpr int kMinConsumerRegisters = 240;
constexpr int kMaxOperandRegisters = 16;
constexpr int kMaxRegisters = 32;
constexpr int kRegistersBesideProducts = 64;

void plan_register_operands(const Kernel& k, const Target& target, const CodegenOptions& options,
                            LoweringPlan& plan);

} // namespace kiln
