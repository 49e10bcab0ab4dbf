// kiln's tile IR: SSA values with static types, ops in structured regions (for with loop-carried
// values, if with results). A Kernel owns its values and its top-level region.
#pragma once

#include "dsl/config.h"
#include "dsl/type.h"
#include "support/error.h"

#include <llvm/ADT/SmallVector.h>

#include <memory>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace kiln {

using ValueId = int32_t;
inline constexpr ValueId kNoValue = -1;

enum class OpKind : uint8_t {
  // Sources
  Constant,    // attrs: f (value; ints stored exactly in i), result shape/dtype from the result type
  Arange,      // attrs: ints = {lo, hi}; result tensor<(hi-lo) x i32>
  ProgramId,   // attrs: axis
  NumPrograms, // attrs: axis
  // Shape manipulation
  Broadcast,  // operand x; result type gives the shape (size-1 dims of x stretched)
  ExpandDims, // operand x; attrs: axis
  Reshape,    // operand x; result type gives the shape
  Trans,      // operand x (rank 2); result is x transposed
  // Arithmetic
  Unary,  // operand x; attrs: unary
  Binary, // operands a, b (same shape); attrs: binary
  Cast,   // operand x; result dtype from the result type
  Where,  // operands cond (i1), a, b
  Fma,    // operands a, b, c (one float type); a * b + c rounded once (fmaf)
  Rand,   // operands seed, offsets (integers, same shape); attrs: random; result f32 (Philox4x32-10)
  Dot,    // operands a (M,K), b (K,N), acc (M,N); attrs: tf32
  Reduce, // operand x; attrs: reduce, axis, keepdims
  ArgMax, // operand x; attrs: axis, keepdims; result i32
  Scan,   // operand x; attrs: reduce (the combine), axis, reverse; inclusive prefix combine, x's type. With
          // reduce == Combine, region 0 is the combine: args (a, b), scalars of x's dtype; elementwise ops;
          // a yield of one scalar of that dtype
  Sort,   // operand x; attrs: axis, reverse (descending); x's elements along axis in order, x's type
  // Memory through tensors of pointers
  AddPtr,    // operands ptr, offsets (integer); result pointer tensor
  Load,      // operands ptrs, [mask, other]; attrs: has_mask
  Store,     // operands ptrs, value, [mask]; attrs: has_mask
  AtomicAdd, // operands ptrs, value, [mask]; attrs: has_mask; result: old values
  // Block pointers
  MakeBlockPtr, // operands base, shape[r], strides[r], offsets[r] (scalars); type gives block shape and order
  Advance,      // operands bp, deltas[r]
  LoadBlock,    // operand bp; attrs: ints = boundary-checked dims, padding
  StoreBlock,   // operands bp, value; attrs: ints = boundary-checked dims
  AtomicAddBlock, // operands bp, value; attrs: ints = boundary-checked dims; adds value to the block, no result
  // Control flow
  For,   // operands lo, hi, step, inits...; region 0 args (iv, carried...); results: carried values
  If,    // operand cond (scalar i1); regions then, else; results
  Yield, // terminator of for/if regions; operands: the yielded values
};

enum class UnaryOp : uint8_t {
  Neg, Not, Exp, Exp2, Log, Log2, Sqrt, Rsqrt, Abs, Tanh, Sigmoid, Erf, Sin, Cos, Log1p, Expm1 };
// Pow sits before And so that the comparisons stay last (is_comparison tests b >= Eq).
enum class BinaryOp : uint8_t { Add, Sub, Mul, Div, Rem, Min, Max, Pow, And, Or, Eq, Ne, Lt, Le, Gt, Ge };
// Combine: a user-supplied combine, the op's region 0 (scans only: associative_scan).
enum class ReduceOp : uint8_t { Sum, Max, Min, Prod, Combine };
// What rand/randn draw: uniform in [0, 1), or standard normal.
enum class RandomDist : uint8_t { Uniform, Normal };
// What a block-pointer load reads outside the tensor along its boundary-checked dims: any value, rounded to
// the block's dtype (a float block takes any float, NaN and infinities included; an integer block an integer
// its dtype holds). Padding::NegInf suits the tail of a max-reduction. Converts from a number, so that
// load(bp, {0}, -1.0f) pads with -1.
struct Padding {
  constexpr Padding(double v = 0.0) : value(v) {}
  double value;
  static const Padding Zero, NaN, NegInf;
};
inline constexpr Padding Padding::Zero{0.0};
inline constexpr Padding Padding::NaN{std::numeric_limits<double>::quiet_NaN()};
inline constexpr Padding Padding::NegInf{-std::numeric_limits<double>::infinity()};
// The same padding: equal values, NaN equal to NaN, -0 not +0 (a load pads with the value's bits).
bool operator==(Padding a, Padding b);

std::string_view op_name(OpKind k);
std::string_view unary_name(UnaryOp u);
std::string_view binary_name(BinaryOp b);
std::string_view reduce_name(ReduceOp r);
std::string padding_name(Padding p); // as the printer writes it: zero, nan, neginf, or the value (-1.5, inf)
inline bool is_comparison(BinaryOp b) { return b >= BinaryOp::Eq; }

struct Op;

// A straight-line list of ops with block arguments (a for-loop's induction variable and carried values).
struct Region {
  Region() = default;
  Region(Region&&) noexcept = default;
  Region& operator=(Region&&) noexcept = default;
  Region(const Region&) = delete;

  llvm::SmallVector<ValueId, 4> args;
  std::vector<std::unique_ptr<Op>> ops;
};

struct Op {
  OpKind kind;
  llvm::SmallVector<ValueId, 4> operands;
  llvm::SmallVector<ValueId, 2> results;
  std::vector<Region> regions;
  SourceLoc loc;

  // Attributes; which are meaningful depends on `kind` (see OpKind).
  llvm::SmallVector<int64_t, 4> ints;
  double f = 0;
  int axis = 0;
  bool keepdims = false;
  bool has_mask = false;
  bool tf32 = false;
  bool reverse = false; // Scan: from the last element along the axis to the first; Sort: descending
  UnaryOp unary = UnaryOp::Neg;
  BinaryOp binary = BinaryOp::Add;
  ReduceOp reduce = ReduceOp::Sum;
  Padding padding = Padding::Zero;
  RandomDist random = RandomDist::Uniform;

  ValueId result() const { return results.empty() ? kNoValue : results[0]; }

  // Typed views of `ints` for the kinds that use it (an InternalError on any other kind), so that no
  // consumer decodes the encoding again.
  int64_t arange_lo() const; // Arange: [lo, hi)
  int64_t arange_hi() const;
  llvm::ArrayRef<int64_t> checked_dims() const; // LoadBlock, StoreBlock, AtomicAddBlock: the checked dims
  bool checks_dim(int64_t dim) const;
  std::optional<int64_t> exact_int() const; // Constant: the value, when it was given as an exact integer
};

struct ValueInfo {
  Type type;
  std::string name;         // a hint for printing and codegen ("acc"); may be empty
  Op* def = nullptr;        // defining op; null for kernel params and region args
  int param_index = -1;     // >= 0 for kernel parameters
  int64_t divisibility = 1; // hint: the value (or every element) is a multiple of this
  int64_t contiguity = 1;   // hint: runs of this many consecutive elements along the last dim
};

struct Param {
  std::string name;
  ValueId value;
};

// A kernel: parameters, a body, and the config it was built with.
struct Kernel {
  std::string name;
  Config config;
  std::vector<Param> params;
  std::vector<ValueInfo> values;
  Region body;

  const Type& type(ValueId v) const { return values.at(v).type; }
  const ValueInfo& info(ValueId v) const { return values.at(v); }
  ValueId new_value(Type t, std::string name = {});
};

// Calls fn(op) for every op in the region, nested regions included, in program order.
template <typename Fn> void walk(const Region& r, Fn&& fn) {
  for (const auto& op : r.ops) {
    fn(*op);
    for (const auto& sub : op->regions)
      walk(sub, fn);
  }
}

} // namespace kiln
