// Pass: a loop's last product issued after the next iteration's first (LateProducts in codegen/lowering_plan.h).
// Runs after plan_products_ahead.
//
// A config asks for it with LAST_PRODUCT_LATE=1. It is done when CodegenOptions allow it, the kernel is
// warp-specialised (a slot is handed back to the producer on its empty barrier, so the consumers can keep it one
// iteration longer), PRODUCT_AHEAD is not on, and in every specialised loop:
//   - the first product, at the top level of the body, needs nothing the iteration computes (the rule of
//     plan_products_ahead.h);
//   - the last product, at the top level and not the first, is on wgmma with A in registers and B one of the
//     loop's ring tiles, accumulates in f32 in the carried value's layout, and is yielded as that carried value,
//     which nothing after it in the body reads;
//   - an op after the first product and before the last one reads the carried value (the wait goes there);
//   - no other product sits between the first product and that op (it would wait for the late one).
// Otherwise LateProducts::why_not says which rule failed and the kernel is generated as before. With PINGPONG=1 a
// consumer warpgroup takes its turn before the first product and passes it on after the late one (or after the
// first, in an iteration with no late product yet): the two products of an iteration go to the tensor cores in
// one turn, FlashAttention-3's schedule.
#pragma once

#include "codegen/codegen.h"
#include "codegen/lowering_plan.h"

namespace kiln {

void plan_late_products(const Kernel& k, const CodegenOptions& options, LoweringPlan& plan);

} // namespace kiln
