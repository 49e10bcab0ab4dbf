// Pass: a loop's last products issued after the next iteration's first (LateProducts in codegen/lowering_plan.h).
// Runs after plan_products_ahead.
//
// A config asks for it with LAST_PRODUCT_LATE=1. It is done when CodegenOptions allow it, the kernel is
// warp-specialised (a slot is handed back to the producer on its empty barrier, so the consumers can keep it one
// iteration longer), PRODUCT_AHEAD is not on, and in every specialised loop:
//   - the first products are the body's first top-level product and each next one that accumulates onto the one
//     before (a chain: Q Kᵀ summed over two head-dim tiles); the first needs nothing the iteration computes (the
//     rule of plan_products_ahead.h);
//   - the last products are the longest run of top-level products at the end of the body, after the first ones,
//     each on wgmma with A in registers and B one of the loop's ring tiles, accumulating in f32 in the layout of
//     the carried value it is yielded as, which nothing after it in the body reads (P V into each head-dim tile);
//   - an op after the first products and before the last ones reads a carried value (the wait goes there);
//   - no other product sits between the first products and that op (it would wait for the late ones).
// Otherwise LateProducts::why_not says which rule failed and the kernel is generated as before. With PINGPONG=1 (one
// first and one last product only) a consumer warpgroup takes its turn before the first product and passes it on
// after the late one (or after the first, in an iteration with no late product yet): the two products of an
// iteration go to the tensor cores in one turn, FlashAttention-3's schedule.
//
// Sibling loops (FA2's unmasked and masked key tiles) are then linked into one pipeline where they allow it
// (LateProduct::continued_by): the next loop of the same region, with only scalar work between, whose late products
// read B from the same ring tile and bytes with A and the accumulator in the same layouts, and whose accumulators
// start from the earlier loop's (read by nothing else), issues the earlier loop's last iteration's late products in
// its first iteration, and its ring starts where the earlier loop's stopped. Not under PINGPONG, nor with
// CodegenOptions::late_across_loops off; LateProducts::why_not_across_loops says why a pair is not linked.
#pragma once

#include "codegen/codegen.h"
#include "codegen/lowering_plan.h"

namespace kiln {

void plan_late_products(const Kernel& k, const CodegenOptions& options, LoweringPlan& plan);

} // namespace kiln
