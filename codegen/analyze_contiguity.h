// Pass: how wide each global access through a tensor of pointers is (LoweringPlan::accesses). A group of a
// thread's registers becomes one 16-byte (or narrower) access when the pointers are proven to advance by
// exactly one element along the last dim: by an affine analysis of the flexible index arithmetic (arange,
// splats, sums, products with constants), or by the user's max_contiguous hint where that analysis cannot
// see (offsets loaded from memory, say). A multiple_of hint on the pointer tile (addresses a multiple of
// that many bytes) drops the run-time alignment check. Also records which atomic adds nobody reads the old
// values of: they lower to reductions (`red`), and on sm_90 f32 runs to vector reductions. And the pieces
// each block store of a register tile is written in, and each block load into registers read in
// (LoweringPlan::block_accesses): up to 16 bytes of a thread's consecutive registers along the block's
// contiguous dim; a store first exchanges lanes to widen the run (which plan_layout_conversions then records
// as a conversion by register shuffles), a load reads its layout's runs as they are.
#pragma once

#include "codegen/codegen.h"
#include "codegen/lowering_plan.h"
#include "codegen/target.h"

namespace kiln {

void analyze_contiguity(const Kernel& k, const Target& target, const CodegenOptions& options,
                        LoweringPlan& plan);

} // namespace kiln
