// Pass: a full and an empty mbarrier per tile of each ring slot of a warp-specialised kernel, instead of one pair a
// slot (WarpSpecialization::tile_barriers in codegen/lowering_plan.h). Runs after plan_late_products.
//
// A config asks for it with TILE_BARRIERS=1. It is done when CodegenOptions allow it, the kernel is
// warp-specialised, every loop sharing the ring copies the same number of tiles a slot, each a block load into
// shared memory, the ring has at most 32 tiles in all (a parity bit each), and PRODUCT_AHEAD is off (its slot wait
// serves the whole slot). Then the producer waits
// for each tile's own release before copying it, and the consumers wait for each tile where it is loaded, not for
// the whole slot at the loop's first load. Under LAST_PRODUCT_LATE a tile that only the first products read (FA2's
// K) goes back right after their wait, and the late products' tiles (V) where the slot went back before, an
// iteration later: with two stages the producer copies K_{j+2} during iteration j and V_{j+2} once P_j V_j has
// retired, where one barrier pair a slot held K_{j+2} back until then too (which is why late products needed three
// stages, worklog §59). FlashAttention-3 keeps K and V in pipelines of their own for the same reason.
// Otherwise WarpSpecialization::why_not_tile_barriers says why and the ring keeps one pair a slot.
#pragma once

#include "codegen/codegen.h"
#include "codegen/lowering_plan.h"

namespace kiln {

void plan_tile_barriers(const Kernel& k, const CodegenOptions& options, LoweringPlan& plan);

} // namespace kiln
