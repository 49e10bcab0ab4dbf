// The printer of the lowering plan: what `kiln emit --stage lowered` shows, KILN_LOG=passes logs and the
// generated source carries as its header comment. It prints the plan and decides nothing.
#pragma once

#include "codegen/lowering_plan.h"

#include <string>

namespace kiln {

// Shared tiles, each dot's instruction and operands, pipelined loops, vectorised accesses and block stores (in
// program order, with their DSL lines), the layouts used, the shared memory, and every layout conversion with
// the DSL line that needs it and how it is made. Two different layouts print differently: where their
// summaries agree, their bases are printed too.
[[nodiscard]] std::string describe_plan(const Kernel& k, const LoweringPlan& plan);

} // namespace kiln
