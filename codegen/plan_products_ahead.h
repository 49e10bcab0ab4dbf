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

} // namespace kiln
