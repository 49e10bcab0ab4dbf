// Pass: when the asynchronous work of a kernel is waited for, recorded in the plan.
//   - deferred_dots: a pipelined loop whose only product is an accumulating wgmma chain (a matmul's k loop)
//     leaves one product in flight across iterations and issues its tiles one stage less far ahead
//     (deferred_wgmma_dot in codegen/wgmma.h);
//   - unwaited_loads: a shared tile loaded before a pipelined loop and first read inside it, after the loop's
//     first wait, needs no wait of its own: cp.async groups complete in order, so that wait covers it, and
//     the copy overlaps the loop's first tiles (FA2's Q tile). Anything that reads the tile earlier, or a
//     loop that is not pipelined, keeps the plain wait.
// Runs after choose_dot_lowering (a deferred chain is a wgmma one).
#pragma once

#include "codegen/codegen.h"
#include "codegen/lowering_plan.h"
#include "codegen/target.h"

namespace kiln {

void schedule_async_copies(const Kernel& k, const Target& target, const CodegenOptions& options,
                           LoweringPlan& plan);

} // namespace kiln
