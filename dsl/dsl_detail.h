// What the DSL functions share (dsl.cpp: sources, arithmetic, shapes, reductions, scans, control flow and
// hints; dsl_memory.cpp: loads, stores, atomics and block pointers): the builder a call adds its op to, an
// operand checked to belong to that builder, a new op stamped with the call site, and the numpy broadcast of
// two shapes. Internal to the DSL (dsl/dsl.h is its interface).
#pragma once

#include "dsl/builder.h"

#include <memory>
#include <string_view>

namespace kiln::dsl_detail {

// The builder of the kernel being built on this thread; an Error at `w` when there is none.
KernelBuilder& B(CallSite w);

// The handle passed to `fn`, checked to hold a value of the kernel being built; an Error at the call
// site otherwise (never an out-of-range access).
const Value& use(const Value& v, std::string_view fn, CallSite where);

// A new op of kind `k` located at the call site.
std::unique_ptr<Op> new_op(OpKind k, CallSite where);

// The numpy broadcast of two shapes: ranks are aligned at the right, and each pair of dims must be
// equal or contain a 1. `fn` and the roles name the operands in the error.
Shape broadcast_shape(const Shape& a, const Shape& b, std::string_view fn, CallSite where,
                      std::string_view a_role = "left operand", std::string_view b_role = "right operand");

} // namespace kiln::dsl_detail
