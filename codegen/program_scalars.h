// Which top-level ops a kernel's scalars come from, so that code other than the program itself can compute
// them again: the warp-specialised producer (its loops' bounds and block pointers) and a persistent grid's
// prefetch of the next program's tiles (their block pointers, for the next program id). Internal to the code
// generator.
#pragma once

#include "codegen/lowering_plan.h"
#include "dsl/ir.h"

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace kiln {

// Where each top-level op of the kernel stands in k.body.ops.
std::map<const Op*, size_t> top_level_positions(const Kernel& k);

// The ops behind the values `needed`, in program order: every one a top-level op before position `before` in
// k.body.ops, placed as a scalar or block pointer, and pure: arithmetic, program ids, block-pointer making
// and stepping, or a scalar load from a parameter the kernel never writes (the same value whenever it is
// read). Parameters and the values `given` accepts are taken as they are; constants inside later code are
// printed where they are used. Empty with `why` set when a value comes from anything else; `who` names what
// needs the values in that message ("the loops' copies").
std::vector<const Op*> top_level_scalar_slice(const Kernel& k, const LoweringPlan& plan,
                                              std::vector<ValueId> needed, size_t before,
                                              const std::function<bool(ValueId)>& given,
                                              const std::string& who, std::string& why);

} // namespace kiln
