// The layouts in which the emitter's printers read register tiles, given the plan's layouts. One owner of
// that rule: the printers read their operands in these layouts, plan_layout_conversions compares them with
// the values' own layouts to decide the conversions before anything is printed, and analyze_contiguity
// sizes global accesses in them. A printer that read an operand in a layout of its own would meet a
// conversion the plan lacks (an InternalError), so the two cannot drift apart silently.
#pragma once

#include "codegen/lowering_plan.h"

namespace kiln {

// `v`'s own layout when it is in registers; otherwise (a flexible value, recomputed wherever it is read)
// the default layout of its type.
Layout register_or_default_layout(const Kernel& k, const LoweringPlan& plan, ValueId v);

// The layout a Reduce or ArgMax reads its operand in.
Layout reduce_input_layout(const Kernel& k, const LoweringPlan& plan, const Op& reduce);

// The layout a global access through a tensor of pointers or a block pointer (Load, Store, AtomicAdd,
// LoadBlock into registers, StoreBlock) walks its tile in: the loaded value's, the stored value's, or for
// a stored value not in registers the atomic's result or the default layout.
Layout access_layout(const Kernel& k, const LoweringPlan& plan, const Op& access);

// The register tile a dot reads as its A operand: the f32 source of a fused cast (packed into the
// fragments as it is read), else A itself.
ValueId dot_a_register_value(const Kernel& k, const LoweringPlan& plan, const Op& dot);
// The layouts a dot reads A and B in when they are not in shared memory: the instruction's fragment
// layouts for mma.sync and wgmma (mma_a_layout, mma_b_layout: tiles of mma_shape.h's fragments), the
// operand's own (or the default) for FMA, which stages it through shared memory.
Layout dot_a_layout(const Kernel& k, const LoweringPlan& plan, const Op& dot);
Layout dot_b_layout(const Kernel& k, const LoweringPlan& plan, const Op& dot);

// The layout a broadcast recomputed in `want` reads its (tile) source in: a flexible source through the
// same registers with the broadcast dims' coordinates zeroed; a register source collapsed over the
// broadcast dims (collapse_layout), which it then reads with a register map and no conversion when it is
// already in that layout.
Layout broadcast_source_layout(const Kernel& k, const LoweringPlan& plan, ValueId source, const Layout& want);

} // namespace kiln
