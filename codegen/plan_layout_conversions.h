// Pass: every layout conversion the kernel needs, recorded in the plan (LoweringPlan::conversions) before any
// CUDA is written. A conversion is needed where an op reads a register tile in a layout (operand_layouts.h)
// whose bases differ from the layout the tile is in; a reshape always goes through one (its result takes the
// default layout of the new shape). Each is made through shared memory, with the scratch it needs; a wgmma
// product's register A operand that needs one is instead staged once as a K-major shared operand tile that the
// product reads by descriptor (ConversionMethod::SharedOperand), unless the product is issued in turn, ahead or
// late. A block
// store whose pieces (LoweringPlan::block_accesses) need a longer register run than the stored layout has
// converts it by register shuffles instead (lane exchanges, widen_register_run).
//
// The walk follows the emitter's reading order and scopes: flexible values are followed into the layouts
// their recomputation reads, and a conversion already made in the current scope or an enclosing one (a loop
// body, an if branch, a wgmma block) is reused rather than planned again, as the emitter reuses it. The
// emitter looks every conversion it makes up here (an InternalError when one is missing or left unused).
// Runs after choose_dot_lowering (fused casts, the dot's instruction) and analyze_contiguity (block stores).
#pragma once

#include "codegen/lowering_plan.h"

namespace kiln {

void plan_layout_conversions(const Kernel& k, LoweringPlan& plan);

} // namespace kiln
