// Pass: products issued one iteration ahead (ProductsAhead in codegen/lowering_plan.h). Runs after
// plan_warp_specialization.
//
// A config asks for it with PRODUCT_AHEAD=1. It is done when CodegenOptions allow it, the kernel is
// warp-specialised (its loops wait on the producer's full barriers, so a slot can be waited for early; a pipelined
// ring has two or more stages, so the next slot is never the current one), and every specialised loop's first
// product, at the top of its body, is on wgmma, left in
// flight by nothing else (not a matmul chain's deferred product), reads an A defined before the loop, a B that is
// one of the loop's ring tiles, and a constant accumulator, and yields an f32 tile. Those are the products whose
// next iteration's instance needs nothing the current iteration computes. Otherwise ProductsAhead::why_not says
// which rule failed and the kernel is generated as before.
#pragma once

#include "codegen/codegen.h"
#include "codegen/lowering_plan.h"

namespace kiln {

void plan_products_ahead(const Kernel& k, const CodegenOptions& options, LoweringPlan& plan);

// Why `dot`, a product in `loop`'s body, needs something the iteration computes ("" when it does not): it must
// be on wgmma, not a chain left in flight, accumulate a constant in f32, read an A defined before the loop and
// one of the loop's ring tiles as B. Such a product can be issued at any point of the loop's iterations once its
// slot is there (plan_products_ahead issues it an iteration early, plan_late_products before the previous
// iteration's last product).
std::string why_product_needs_the_iteration(const Kernel& k, const LoweringPlan& plan, const Op& loop, const Op& dot);

} // namespace kiln
