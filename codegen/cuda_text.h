// Text of generated CUDA that depends on no emitter state: C types of dtypes, literals, the expressions of
// elementwise ops and reductions, identifiers. Internal to the code generator (emit_*.cpp).
#pragma once

#include "codegen/layout.h"
#include "dsl/ir.h"

#include <string>
#include <vector>

namespace kiln::emit_detail {

// The C++ type of a dtype in generated code ("float", "kiln::f16", ...), and of a value's type (pointers
// too).
std::string ctype(DType t);
std::string ctype_of(const Type& t);
// A literal of dtype `t` (with the prelude's constructors for 16-bit floats; inf and NaN spelled out).
std::string literal(double v, DType t);
// 16-bit floats compute in f32: as_math widens an expression, from_math narrows it back.
std::string as_math(const std::string& x, DType t);
std::string from_math(const std::string& x, DType t);
// The expression of one elementwise op on operand expressions (erf below f64 calls the erf prelude, which
// Emitter::unary_text adds to the kernel).
std::string unary_expr(UnaryOp u, const std::string& x0, DType t);
std::string binary_expr(BinaryOp b, const std::string& a0, const std::string& b0, DType t);
// fma(a, b, c) of float dtype `t`: one rounding in f32 (f16/bf16 widened, the result narrowed) or f64.
std::string fma_expr(const std::string& a, const std::string& b, const std::string& c, DType t);
// One Philox draw (codegen/prelude/kiln_philox.cuh) for integer `seed` and `offset`.
std::string random_expr(RandomDist d, const std::string& seed, const std::string& offset);
// The combining expression and the identity of a reduction.
std::string reduce_combine(ReduceOp r, const std::string& a, const std::string& b, DType t);
std::string reduce_identity(ReduceOp r, DType t);
// The boundary check of a block-pointer access along `dim`: coordinate `c` (an expression) inside the
// tensor, or (run) the `run` elements from c all inside it. Every checked access builds its predicate from
// these, so that the rule lives in one place.
std::string in_bounds(const std::string& c, const std::string& bp, int dim);
std::string run_in_bounds(const std::string& c, const std::string& bp, int dim, int64_t run);
// The DSL lines of `ops`, in order: "fa2_bwd_dkdv.cpp:152, fa2_bwd_dkdv.cpp:180" (comments and the plan's summary).
std::string source_lines(const std::vector<const Op*>& ops);
// A C identifier from a value's name hint.
std::string identifier(const std::string& hint);
// A string that is equal for two layouts exactly when their shapes and bases are.
std::string layout_key(const Layout& l);

} // namespace kiln::emit_detail
