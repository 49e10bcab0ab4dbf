// Forward-mode differentiation of elementwise DSL expressions, as dual numbers: every value carries a
// tangent (its derivative with respect to one input), and each op's tangent is built, as DSL ops, from its
// operands' values and tangents. It runs over the ops an expression has already built (the IR records
// them, with their operands), so that any C++ callable that builds DSL ops can be differentiated, without
// being written against a dual type. Attention's score mods use it for the backward (attention_mods.h).
#pragma once

#include "dsl/builder.h"

namespace kiln {

// d y / d x, elementwise, as a float tile (f32) of a shape broadcastable to y's, built with the ops y was
// built from: y must have been built from x by elementwise ops (arithmetic, exp/exp2/log/log2/sqrt/rsqrt,
// tanh, sigmoid, erf, sin, cos, log1p, expm1, abs, pow, min/max, where, fma, float casts, shape ops
// (broadcast, expand_dims, reshape, trans)). Values that do not depend on x (loads, indices, kernel
// arguments) are constants; comparisons and integer results have derivative 0 (steps). An op that depends
// on x and has no elementwise derivative (a reduction, a scan, a dot, if_ or for_range, a remainder by x)
// is a kiln::Error naming the op and its call site; `what` prefixes the message (e.g. "score_mod 'f'").
// An empty Value means exactly 1 (y is x plus terms that do not depend on it: `s + bias`), so that a caller
// multiplying by the derivative builds nothing.
Value derivative_of(const Value& y, const Value& x, const std::string& what,
                    CallSite where = CallSite::current());

} // namespace kiln
