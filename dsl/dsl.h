// The kiln DSL: what a kernel is written with. Triton's vocabulary in C++:
//
//   KernelBuilder kb("add", config);
//   Value x = kb.arg_ptr("x", f32), y = kb.arg_ptr("y", f32), n = kb.arg("n", i32);
//   Value offs = program_id(0) * BLOCK + arange(0, BLOCK);   // (BLOCK,) i32
//   Value mask = offs < n;
//   store(x + offs, load(x + offs, mask, 0.0f) + load(y + offs, mask, 0.0f), mask);
//
// Every function takes the call site as a defaulted last argument, so errors name the user's line.
#pragma once

#include "dsl/builder.h"

#include <vector>

namespace kiln {

// ---- sources ----
Value program_id(int axis, CallSite where = CallSite::current());
Value num_programs(int axis, CallSite where = CallSite::current());
Value arange(int64_t lo, int64_t hi, CallSite where = CallSite::current()); // (hi-lo,) i32
Value full(const Shape& shape, double value, DType t, CallSite where = CallSite::current());
Value zeros(const Shape& shape, DType t, CallSite where = CallSite::current());
Value scalar(double value, DType t, CallSite where = CallSite::current());

// ---- elementwise (operands broadcast numpy-style; dtypes promote as in Triton) ----
Value operator+(const Operand& a, const Operand& b);
Value operator-(const Operand& a, const Operand& b);
Value operator*(const Operand& a, const Operand& b);
Value operator/(const Operand& a, const Operand& b);
Value operator%(const Operand& a, const Operand& b);
Value operator<(const Operand& a, const Operand& b);
Value operator<=(const Operand& a, const Operand& b);
Value operator>(const Operand& a, const Operand& b);
Value operator>=(const Operand& a, const Operand& b);
Value operator==(const Operand& a, const Operand& b);
Value operator!=(const Operand& a, const Operand& b);
Value operator&&(const Operand& a, const Operand& b);
Value operator||(const Operand& a, const Operand& b);
Value operator&(const Operand& a, const Operand& b);
Value operator|(const Operand& a, const Operand& b);
// Unary operators take an Operand so that the conversion captures the user's call site.
Value operator-(const Operand& a);
Value operator!(const Operand& a);
Value& operator+=(Value& a, const Operand& b);
Value& operator-=(Value& a, const Operand& b);
Value& operator*=(Value& a, const Operand& b);
Value& operator/=(Value& a, const Operand& b);

Value minimum(const Operand& a, const Operand& b, CallSite where = CallSite::current());
Value maximum(const Operand& a, const Operand& b, CallSite where = CallSite::current());
Value where(const Operand& cond, const Operand& a, const Operand& b, CallSite where = CallSite::current());
Value cdiv(const Operand& a, const Operand& b, CallSite where = CallSite::current()); // (a + b - 1) / b
Value exp(const Value& x, CallSite where = CallSite::current());
Value exp2(const Value& x, CallSite where = CallSite::current());
Value log(const Value& x, CallSite where = CallSite::current());
Value log2(const Value& x, CallSite where = CallSite::current());
Value sqrt(const Value& x, CallSite where = CallSite::current());
Value rsqrt(const Value& x, CallSite where = CallSite::current());
Value abs(const Value& x, CallSite where = CallSite::current());
// Transcendentals of float tiles and scalars (f16/bf16 compute in f32 and round once, like exp); an integer
// operand is an Error (convert it with .to(f32)). sigmoid(x) = 1 / (1 + exp(-x)), without overflow for any x.
Value tanh(const Value& x, CallSite where = CallSite::current());
Value sigmoid(const Value& x, CallSite where = CallSite::current());
Value erf(const Value& x, CallSite where = CallSite::current());
Value sin(const Value& x, CallSite where = CallSite::current());
Value cos(const Value& x, CallSite where = CallSite::current());
// log(1 + x) and exp(x) - 1, accurate near x = 0 where log(1 + x) and exp(x) - 1 lose every digit (CUDA's
// log1pf/expm1f); float operands only.
Value log1p(const Value& x, CallSite where = CallSite::current());
Value expm1(const Value& x, CallSite where = CallSite::current());
// a * b + c elementwise with a single rounding (CUDA's fmaf / fma; f16/bf16 compute in f32 and round once more
// to their dtype). Operands broadcast and promote like `+` (literals take the tiles' dtype); float only.
Value fma(const Operand& a, const Operand& b, const Operand& c, CallSite where = CallSite::current());
// Counter-based random numbers (Philox4x32-10, as Triton's rand/randn): an f32 tile of the offsets' shape,
// element i a function of (seed, offsets[i]) only, so that the same seed and offsets give the same numbers in
// the interpreter and on the GPU, in any program and any order. `seed` is an integer scalar (i32 or i64, a
// kernel argument or a literal), `offsets` an integer tile or scalar; distinct offsets under one seed give
// independent numbers (dropout: offsets = the element's index). rand is uniform in [0, 1) (24-bit steps);
// randn is standard normal (Box-Muller on the block's first two words).
Value rand(const Operand& seed, const Operand& offsets, CallSite where = CallSite::current());
Value randn(const Operand& seed, const Operand& offsets, CallSite where = CallSite::current());
// a ** b elementwise, broadcasting and promoting like `+` (C's pow: a negative base with a non-integer
// exponent gives NaN); float operands only.
Value pow(const Operand& a, const Operand& b, CallSite where = CallSite::current());

// ---- shapes ----
Value expand_dims(const Value& x, int axis, CallSite where = CallSite::current());
Value broadcast_to(const Value& x, const Shape& shape, CallSite where = CallSite::current());
Value reshape(const Value& x, const Shape& shape, CallSite where = CallSite::current());
Value trans(const Value& x, CallSite where = CallSite::current());

// ---- matrix multiply and reductions ----
// a (M, K) @ b (K, N) + acc (M, N). f16/bf16 accumulate in f32; f32 is exact unless tf32 is asked. Any shape: a
// dot with M, N or K below 16 (the tensor cores' smallest tile) runs on the CUDA cores by fused multiply-adds,
// exact in f32 accumulation for every dtype (tf32 does not apply there).
Value dot(const Value& a, const Value& b, const Value& acc, bool tf32 = false, CallSite where = CallSite::current());
Value dot(const Value& a, const Value& b, CallSite where = CallSite::current());
Value sum(const Value& x, int axis, bool keepdims = false, CallSite where = CallSite::current());
Value max(const Value& x, int axis, bool keepdims = false, CallSite where = CallSite::current());
Value min(const Value& x, int axis, bool keepdims = false, CallSite where = CallSite::current());
Value argmax(const Value& x, int axis, bool keepdims = false, CallSite where = CallSite::current());
// The product along `axis` (Triton's tl.reduce with a multiply): float products compute in double and round
// once in the interpreter (the GPU multiplies in f32 in its tree order, f64 for f64), integer products wrap.
Value prod(const Value& x, int axis, bool keepdims = false, CallSite where = CallSite::current());

// ---- scans (Triton's tl.cumsum, tl.cumprod, tl.cummax, tl.associative_scan) ----
// The inclusive prefix of `combine` along `axis` of a tile of rank 1 or more: out[.., i, ..] = x[.., 0, ..]
// op x[.., 1, ..] op ... op x[.., i, ..]; with `reverse`, the suffix x[.., i, ..] op ... op x[.., n-1, ..].
// The result has x's shape and dtype. Float sums and products accumulate in double and round each prefix once
// in the interpreter (the GPU accumulates in f32, f64 for f64); integer sums and products wrap; max/min
// ignore NaN as `max` does.
Value scan(const Value& x, int axis, ReduceOp combine, bool reverse = false, CallSite where = CallSite::current());
Value cumsum(const Value& x, int axis, bool reverse = false, CallSite where = CallSite::current());
Value cumprod(const Value& x, int axis, bool reverse = false, CallSite where = CallSite::current());
Value cummax(const Value& x, int axis, bool reverse = false, CallSite where = CallSite::current());
Value cummin(const Value& x, int axis, bool reverse = false, CallSite where = CallSite::current());
// A scan with a combine of the user's, as tl.associative_scan(x, axis, combine_fn): `combine(a, b)` is called
// once, on two scalars of x's dtype, and builds the combine from elementwise DSL ops (arithmetic,
// comparisons, where, casts, fma, math functions, literals); it returns one scalar of x's dtype, and may use
// no other value of the kernel and no load, store, dot, reduction, program_id or control flow (each an
// Error). `a` is the prefix so far and `b` the next element in scan order (reverse: from the end). The
// combine must be associative: the GPU groups the prefix in its own order (runs of a line combined and then
// offset by the runs before them), the interpreter left to right, so only an associative combine agrees
// exactly (a float sum agrees within its roundings; a - b not at all). Its ops round to x's dtype at every
// step. The combine's ops are part of the kernel's printed IR, so two combines never share a cached binary.
using CombineFn = std::function<Value(Value a, Value b)>;
Value associative_scan(const Value& x, int axis, const CombineFn& combine, bool reverse = false,
                       CallSite where = CallSite::current());

// ---- sort (Triton's tl.sort) ----
// x's elements along `axis` in ascending order (descending: the reverse), x's shape and dtype; every dim of a
// tile is a power of two, as the GPU's bitonic network needs. Floats are ordered totally: -inf < ... < -0 < +0
// < ... < inf < NaN (descending puts NaN first), so the interpreter and the GPU agree on every element.
Value sort(const Value& x, int axis, bool descending = false, CallSite where = CallSite::current());

// ---- memory through tensors of pointers (`ptr + offsets` builds them) ----
Value load(const Value& ptrs, const Value& mask, const Operand& other = 0, CallSite where = CallSite::current());
void store(const Value& ptrs, const Value& value, const Value& mask, CallSite where = CallSite::current());
Value atomic_add(const Value& ptrs, const Value& value, const Value& mask = Value(),
                 CallSite where = CallSite::current());

// ---- block pointers ----
// A block_shape window at `offsets` into a tensor of `shape` and `strides` (in elements) at `base`.
// `order` lists the dims from fastest- to slowest-varying in memory: (1, 0) is row-major.
Value make_block_ptr(const Value& base, llvm::ArrayRef<Operand> shape, llvm::ArrayRef<Operand> strides,
                     llvm::ArrayRef<Operand> offsets, const Shape& block_shape, llvm::ArrayRef<int> order,
                     CallSite where = CallSite::current());
Value advance(const Value& block_ptr, llvm::ArrayRef<Operand> deltas, CallSite where = CallSite::current());
// Loads a block pointer's block (or, unmasked, a tensor of pointers). Dims in `boundary_check` are
// checked against the tensor's shape and padded with `padding` outside it: Padding::Zero, ::NaN, ::NegInf
// or any number (load(bp, {1}, -1.0f)), rounded to the block's dtype; an integer block takes an integer.
Value load(const Value& ptr, BoundaryCheck boundary_check = {}, Padding padding = Padding::Zero,
           CallSite where = CallSite::current());
// Stores through a block pointer (or, unmasked, a tensor of pointers).
void store(const Value& ptr, const Value& value, BoundaryCheck boundary_check = {},
           CallSite where = CallSite::current());
// Adds `value` to the block's elements, atomically element by element (as Triton's descriptor atomic_add);
// dims in `boundary_check` skip what lies outside the tensor. Nothing comes back, so the code generator may
// gather the block in shared memory and add it with one bulk reduction (sm_90: cp.reduce.async.bulk).
// atomic_add(block_ptr, value) with no mask is the same with no boundary check (and returns no value).
void atomic_add(const Value& block_ptr, const Value& value, BoundaryCheck boundary_check,
                CallSite where = CallSite::current());

// ---- control flow ----
// for (i = lo; i < hi; i += step) body(i). Variables the body reassigns are carried across iterations.
void for_range(const Operand& lo, const Operand& hi, const Operand& step, const std::function<void(Value)>& body,
               CallSite where = CallSite::current());
// if (cond) then_body() else else_body(), on a run-time scalar; reassigned variables become results.
void if_(const Value& cond, const std::function<void()>& then_body, const std::function<void()>& else_body = {},
         CallSite where = CallSite::current());

// ---- hints and compile-time checks ----
// Facts the code generator cannot prove, as Triton's: multiple_of(x, d) says every element of x is a multiple
// of d (for a tile of pointers, every address is a multiple of d bytes: vector accesses through it need no
// run-time alignment check); max_contiguous(x, n) says x's last dim holds runs of n consecutive values, each
// starting at an index that is a multiple of n (a gather through such offsets is vectorised). Both return x.
// Hints are trusted, not checked: a false one gives wrong results on the GPU; the interpreter ignores them.
Value multiple_of(const Value& x, int64_t divisor, CallSite where = CallSite::current());
Value max_contiguous(const Value& x, int64_t run, CallSite where = CallSite::current());
// Fails the kernel build with `message` when a compile-time condition on the config does not hold.
void static_check(bool condition, const std::string& message, CallSite where = CallSite::current());

} // namespace kiln
