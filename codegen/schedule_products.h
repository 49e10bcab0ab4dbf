// Pass: in a loop body, wgmma products issued as early as their operands allow and waited for where the body first
// needs them done (ProductSchedule in codegen/lowering_plan.h). Runs after plan_layout_conversions (a product whose
// A is staged in the scratch keeps its place and its wait) and after the passes that plan products' issue order
// themselves (their loops are left alone).
//
// wgmma runs asynchronously: `wgmma.wait_group n` blocks until at most the n most recent groups are in flight, and
// groups complete in the order they were committed. Waiting right after each product, where the program computes
// it, leaves the tensor cores idle while the warpgroup computes, and runs one product at a time. So in the body of
// every for loop (its top level; nested loops have their own):
//   - Issue early. A product is moved up to right after the latest of: the ops its operands need (other than the
//     ones that emit nothing a product waits on, which move with it: a ring stage's load that does not wait for the
//     slot, a trans of a shared tile, a constant, a value computed where it is read), the products already moved
//     to the same place (those keep their program order), the load that waits for the ring slot, and any op with
//     regions or that writes a shared tile that is not a ring stage. It is not moved past an op that converts a
//     value it reads (the conversion was planned, in program order, at that op). A product whose operands are
//     ready sooner may pass an earlier one: FA2's backward computes P from Q Kᵀ before dO Vᵀ, which needs neither,
//     and P dO: dO Vᵀ is issued right after Q Kᵀ, above P dO. (Keeping every product's order was tried: it undoes
//     that, and 19 of the backward's renderings change; worklog §111.)
//   - Wait at the first use. Walking the body in that order, each product is committed as one group and stays in
//     flight until an op reads its result (through values computed where they are read, and casts fused into a
//     product's A): `wgmma_wait<n>` before that op, n the products issued after the newest one it reads. An op with
//     regions and a block load into a shared tile that is not a ring stage (it may overwrite what a product reads)
//     wait for every product. A product whose A is staged in the scratch (later conversions reuse those bytes)
//     waits at its issue, which retires every product before it. The end of the body waits for what is left,
//     before the slot goes back to the producer and the carried values are yielded.
// With PRODUCTS_IN_ORDER=1 in the kernel's config the first step is left out: each product is issued where the
// program computes it and still waited for at its first reader, so that fewer accumulators are in flight at once
// (dK/dV's 128 x 128 tile at D = 64: dO Vᵀ in flight under P's exponentials is 64 registers a thread, and ptxas
// spilled 260 bytes with it, 16 without; worklog §109).
// So FA2's backward (dK/dV and dQ) runs dO Vᵀ under P's exponentials and P dO under dS. Where nothing comes between a
// product and its reader, the code is as before. Off (each product where the program computes it, waited for at its
// issue) when CodegenOptions::product_schedule is.
#pragma once

#include "codegen/codegen.h"
#include "codegen/lowering_plan.h"

namespace kiln {

void schedule_products(const Kernel& k, const CodegenOptions& options, LoweringPlan& plan);

} // namespace kiln
