// The typing rules of kiln's IR, in one place: the builder calls infer_result_type on every op it
// creates (so a user's mistake is reported at its DSL call site), and verify() re-checks a whole
// kernel (so a pass that breaks the IR is caught).
#pragma once

#include "dsl/ir.h"

#include <optional>

namespace kiln {

// The result type of `op` from its operands and attributes. Ops whose result type the builder
// chooses (constant, broadcast, reshape, cast) must already carry a result; it is checked.
// Ill-formed ops raise kiln::Error naming the op, the operand types and the call site.
std::optional<Type> infer_result_type(const Op& op, const Kernel& k);

// The rules on a Scan's (or Sort's) operand and axis (part of infer_result_type; associative_scan checks them
// before it builds the combine, so that a wrong operand is reported as such, not as an error inside the
// combine).
void check_scan_operand(const Op& scan, const Kernel& k);

// The rules on a Scan's combine region (ReduceOp::Combine: dsl/verify_combine.cpp): two scalar arguments of
// x's dtype, elementwise ops on the combine's own values only, a yield of one scalar of x's dtype. User
// mistakes are kiln::Errors at the scan's call site naming the offending op and its line.
void check_combine(const Op& scan, const Kernel& k);

// Checks every op of the kernel: types, regions, yields, that every value is defined once, and that
// every operand is defined before its use in an enclosing scope. The builder has already reported
// user mistakes at their call sites, so any failure here is IR broken by kiln: InternalError.
void verify(const Kernel& k);

inline bool is_power_of_two(int64_t x) { return x > 0 && (x & (x - 1)) == 0; }

} // namespace kiln
