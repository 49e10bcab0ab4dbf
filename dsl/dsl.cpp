// The DSL functions: each builds one or a few IR ops through the current KernelBuilder, adding the
// broadcasts and casts that Triton's rules imply, so that the IR itself has only exact types. Loads, stores,
// atomics and block pointers are dsl_memory.cpp's; what both files share is dsl_detail.h.
#include "dsl/dsl.h"

#include "dsl/dsl_detail.h"
#include "dsl/tile_limits.h"
#include "dsl/verifier.h"

#include <cmath>

namespace kiln {

namespace dsl_detail {

KernelBuilder& B(CallSite w) { return KernelBuilder::current(w); }

const Value& use(const Value& v, std::string_view fn, CallSite where) {
  KernelBuilder& b = B(where);
  if (!v.valid())
    fail_at(loc_of(where),
            "{}: an operand holds no value (a kiln::Value declared but never assigned, or left over from a "
            "finished kernel)",
            fn);
  if (v.builder() != &b)
    fail_at(loc_of(where), "{}: an operand belongs to another kernel's builder; values cannot cross kernels", fn);
  return v;
}

std::unique_ptr<Op> new_op(OpKind k, CallSite where) {
  auto op = std::make_unique<Op>();
  op->kind = k;
  op->loc = loc_of(where);
  return op;
}

Shape broadcast_shape(const Shape& a, const Shape& b, std::string_view fn, CallSite where,
                      std::string_view a_role, std::string_view b_role) {
  size_t r = std::max(a.size(), b.size());
  Shape out(r, 1);
  for (size_t i = 0; i < r; ++i) {
    int64_t da = i < r - a.size() ? 1 : a[i - (r - a.size())];
    int64_t db = i < r - b.size() ? 1 : b[i - (r - b.size())];
    if (da != db && da != 1 && db != 1)
      fail_at(loc_of(where),
              "{}: the {} shape {} and the {} shape {} do not broadcast: dim {} of the aligned shapes is {} vs {} "
              "(dims must be equal or 1)",
              fn, a_role, shape_str(a), b_role, shape_str(b), i, da, db);
    out[i] = da == 1 ? db : da;
  }
  return out;
}

} // namespace dsl_detail

using namespace dsl_detail;

namespace {

Value unary_op(const Value& x, UnaryOp u, CallSite where) {
  auto op = new_op(OpKind::Unary, where);
  op->unary = u;
  op->operands = {x.id()};
  return B(where).emit(std::move(op));
}

// The dtype a literal takes when it meets `other`: the other's dtype, except that a fractional
// literal meeting an integer tile makes an f32 (as `int_tensor * 0.5` does in Triton).
DType literal_type(const Operand& lit, const Value* other) {
  if (!other || !other->valid())
    return lit.is_float ? DType::f32 : DType::i32;
  DType t = other->type().is_pointer() ? DType::i32 : other->dtype();
  if (lit.is_float && !is_float(t))
    return DType::f32;
  if (!lit.is_float && t == DType::i1)
    return DType::i32;
  return t;
}

Value value_of(const Operand& o, const Operand& partner, std::string_view fn, CallSite where) {
  if (!o.is_literal)
    return use(*o.value, fn, where);
  const Value* other = partner.is_literal || !partner.value->valid() ? nullptr : partner.value;
  return B(where).literal(o, literal_type(o, other), where);
}

Value cast_to(const Value& x, DType t, CallSite where) { return x.dtype() == t ? x : x.to(t, where); }

// Both operands of an elementwise op at one shape and, unless `keep_types`, one dtype.
std::pair<Value, Value> unify(const Operand& oa, const Operand& ob, std::string_view fn, CallSite where,
                              bool keep_types = false) {
  Value a = value_of(oa, ob, fn, where), b = value_of(ob, oa, fn, where);
  Shape s = broadcast_shape(a.shape(), b.shape(), fn, where);
  a = broadcast_to(a, s, where);
  b = broadcast_to(b, s, where);
  if (!keep_types && a.type().is_tensor() && b.type().is_tensor()) {
    DType t = promote(a.dtype(), b.dtype());
    a = cast_to(a, t, where);
    b = cast_to(b, t, where);
  }
  return {a, b};
}

Value binary(const Operand& oa, const Operand& ob, BinaryOp k, CallSite where) {
  std::string_view fn = binary_name(k);
  const Type* ta = oa.is_literal ? nullptr : &use(*oa.value, fn, where).type();
  const Type* tb = ob.is_literal ? nullptr : &use(*ob.value, fn, where).type();
  if ((ta && ta->is_block_ptr()) || (tb && tb->is_block_ptr()))
    fail_at(loc_of(where), "{}: arithmetic on a block pointer ({}) is not supported; move it with advance(bp, "
            "{{deltas}})", fn, (ta && ta->is_block_ptr() ? ta : tb)->str());
  // Pointer arithmetic: ptr + offsets (either order), ptr - offsets.
  bool a_ptr = ta && ta->is_pointer();
  bool b_ptr = tb && tb->is_pointer();
  if (a_ptr || b_ptr) {
    if ((k != BinaryOp::Add && !(k == BinaryOp::Sub && a_ptr)) || (a_ptr && b_ptr))
      fail_at(loc_of(where), "{}: pointers support only `pointer + offsets` and `pointer - offsets`; got {} {} {}",
              fn, oa.is_literal ? "a literal" : ta->str(), fn, ob.is_literal ? "a literal" : tb->str());
    auto [p, off] = a_ptr ? unify(oa, ob, "addptr", where, true) : unify(ob, oa, "addptr", where, true);
    if (k == BinaryOp::Sub)
      off = -off;
    auto op = new_op(OpKind::AddPtr, where);
    op->operands = {p.id(), off.id()};
    return B(where).emit(std::move(op));
  }
  auto [a, b] = unify(oa, ob, fn, where);
  auto op = new_op(OpKind::Binary, where);
  op->binary = k;
  op->operands = {a.id(), b.id()};
  return B(where).emit(std::move(op));
}

Value reduce(const Value& x, int axis, bool keepdims, OpKind kind, ReduceOp r, CallSite where) {
  use(x, kind == OpKind::ArgMax ? "argmax" : reduce_name(r), where);
  auto op = new_op(kind, where);
  op->reduce = r;
  op->axis = axis < 0 ? axis + x.rank() : axis;
  op->keepdims = keepdims;
  op->operands = {x.id()};
  return B(where).emit(std::move(op));
}

Value declared(OpKind k, const Value& x, Type t, CallSite where) {
  auto op = new_op(k, where);
  op->operands = {x.id()};
  op->results.push_back(B(where).kernel().new_value(std::move(t)));
  return B(where).emit(std::move(op));
}

} // namespace

// ---- Value members ----

Value Value::to(DType t, CallSite where) const {
  use(*this, "to", where);
  if (!type().is_tensor())
    fail_at(loc_of(where), "to: cannot convert {} to {}; only numbers convert", type().str(), dtype_name(t));
  if (t == dtype())
    return *this;
  return declared(OpKind::Cast, *this, type().with_elem(t), where);
}
Value Value::expand_dims(int axis, CallSite where) const { return kiln::expand_dims(*this, axis, where); }
Value Value::trans(CallSite where) const { return kiln::trans(*this, where); }
Value Value::reshape(Shape s, CallSite where) const { return kiln::reshape(*this, s, where); }
Value Value::broadcast_to(Shape s, CallSite where) const { return kiln::broadcast_to(*this, s, where); }

// ---- sources ----

Value program_id(int axis, CallSite where) {
  auto op = new_op(OpKind::ProgramId, where);
  op->axis = axis;
  return B(where).emit(std::move(op));
}

Value num_programs(int axis, CallSite where) {
  auto op = new_op(OpKind::NumPrograms, where);
  op->axis = axis;
  return B(where).emit(std::move(op));
}

Value arange(int64_t lo, int64_t hi, CallSite where) {
  auto op = new_op(OpKind::Arange, where);
  op->ints = {lo, hi};
  return B(where).emit(std::move(op));
}

Value constant(std::string_view fn, const Shape& shape, double value, DType t, CallSite where) {
  for (int64_t d : shape)
    if (!is_power_of_two(d))
      fail_at(loc_of(where),
              "{}: shape {} has a dim that is not a power of two ({}); tile dims must be powers of two (round up "
              "and mask the extra elements)",
              fn, shape_str(shape), d);
  auto op = new_op(OpKind::Constant, where);
  op->f = value;
  if (!is_float(t)) {
    if (!int_dtype_holds(t, value)) {
      auto [lo, hi] = int_range(t);
      fail_at(loc_of(where), "{}: the value {} is not an integer in the range of {} ([{}, {}]); use a float dtype "
              "or an integer value", fn, value, dtype_name(t), lo, hi);
    }
    op->ints = {static_cast<int64_t>(value)};
  }
  op->results.push_back(B(where).kernel().new_value(Type::tensor(t, shape)));
  return B(where).emit(std::move(op));
}

Value full(const Shape& shape, double value, DType t, CallSite where) { return constant("full", shape, value, t, where); }
Value zeros(const Shape& shape, DType t, CallSite where) { return constant("zeros", shape, 0.0, t, where); }
Value scalar(double value, DType t, CallSite where) { return constant("scalar", {}, value, t, where); }

// ---- elementwise ----

#define KILN_BINARY_OPERATOR(sym, kind)                                                                        \
  Value operator sym(const Operand& a, const Operand& b) { return binary(a, b, BinaryOp::kind, a.where); }
KILN_BINARY_OPERATOR(+, Add)
KILN_BINARY_OPERATOR(-, Sub)
KILN_BINARY_OPERATOR(*, Mul)
KILN_BINARY_OPERATOR(/, Div)
KILN_BINARY_OPERATOR(%, Rem)
KILN_BINARY_OPERATOR(<, Lt)
KILN_BINARY_OPERATOR(<=, Le)
KILN_BINARY_OPERATOR(>, Gt)
KILN_BINARY_OPERATOR(>=, Ge)
KILN_BINARY_OPERATOR(==, Eq)
KILN_BINARY_OPERATOR(!=, Ne)
KILN_BINARY_OPERATOR(&&, And)
KILN_BINARY_OPERATOR(||, Or)
KILN_BINARY_OPERATOR(&, And)
KILN_BINARY_OPERATOR(|, Or)
#undef KILN_BINARY_OPERATOR

Value operator-(const Operand& a) {
  if (a.is_literal)
    throw InternalError("unary minus of a literal reached the DSL");
  return unary_op(*a.value, UnaryOp::Neg, a.where);
}
Value operator!(const Operand& a) {
  if (a.is_literal)
    throw InternalError("`!` of a literal reached the DSL");
  return unary_op(*a.value, UnaryOp::Not, a.where);
}
Value& operator+=(Value& a, const Operand& b) { return a = binary(Operand(a, b.where), b, BinaryOp::Add, b.where); }
Value& operator-=(Value& a, const Operand& b) { return a = binary(Operand(a, b.where), b, BinaryOp::Sub, b.where); }
Value& operator*=(Value& a, const Operand& b) { return a = binary(Operand(a, b.where), b, BinaryOp::Mul, b.where); }
Value& operator/=(Value& a, const Operand& b) { return a = binary(Operand(a, b.where), b, BinaryOp::Div, b.where); }

Value minimum(const Operand& a, const Operand& b, CallSite where) { return binary(a, b, BinaryOp::Min, where); }
Value maximum(const Operand& a, const Operand& b, CallSite where) { return binary(a, b, BinaryOp::Max, where); }

Value where(const Operand& cond, const Operand& a, const Operand& b, CallSite w) {
  Value c = cond.is_literal ? B(w).operand(cond, DType::i1) : use(*cond.value, "where", w);
  auto [x, y] = unify(a, b, "where", w);
  Shape s = broadcast_shape(c.shape(), x.shape(), "where", w, "condition", "value");
  c = broadcast_to(c, s, w);
  x = broadcast_to(x, s, w);
  y = broadcast_to(y, s, w);
  auto op = new_op(OpKind::Where, w);
  op->operands = {c.id(), x.id(), y.id()};
  return B(w).emit(std::move(op));
}

Value cdiv(const Operand& a, const Operand& b, CallSite where) {
  auto [x, y] = unify(a, b, "cdiv", where);
  return binary(binary(binary(x, y, BinaryOp::Add, where), 1, BinaryOp::Sub, where), y, BinaryOp::Div, where);
}

Value exp(const Value& x, CallSite w) { return unary_op(x, UnaryOp::Exp, w); }
Value exp2(const Value& x, CallSite w) { return unary_op(x, UnaryOp::Exp2, w); }
Value log(const Value& x, CallSite w) { return unary_op(x, UnaryOp::Log, w); }
Value log2(const Value& x, CallSite w) { return unary_op(x, UnaryOp::Log2, w); }
Value sqrt(const Value& x, CallSite w) { return unary_op(x, UnaryOp::Sqrt, w); }
Value rsqrt(const Value& x, CallSite w) { return unary_op(x, UnaryOp::Rsqrt, w); }
Value abs(const Value& x, CallSite w) { return unary_op(x, UnaryOp::Abs, w); }
Value tanh(const Value& x, CallSite w) { return unary_op(x, UnaryOp::Tanh, w); }
Value sigmoid(const Value& x, CallSite w) { return unary_op(x, UnaryOp::Sigmoid, w); }
Value erf(const Value& x, CallSite w) { return unary_op(x, UnaryOp::Erf, w); }
Value sin(const Value& x, CallSite w) { return unary_op(x, UnaryOp::Sin, w); }
Value cos(const Value& x, CallSite w) { return unary_op(x, UnaryOp::Cos, w); }
Value log1p(const Value& x, CallSite w) { return unary_op(x, UnaryOp::Log1p, w); }
Value expm1(const Value& x, CallSite w) { return unary_op(x, UnaryOp::Expm1, w); }
Value pow(const Operand& a, const Operand& b, CallSite where) { return binary(a, b, BinaryOp::Pow, where); }

Value fma(const Operand& a, const Operand& b, const Operand& c, CallSite where) {
  // a and b meet first (a literal takes the other's dtype); c then meets their product's type.
  auto [x, y] = unify(a, b, "fma", where);
  auto [xy, z] = unify(Operand(x, where), c, "fma", where);
  x = broadcast_to(cast_to(x, xy.dtype(), where), xy.shape(), where);
  y = broadcast_to(cast_to(y, xy.dtype(), where), xy.shape(), where);
  auto op = new_op(OpKind::Fma, where);
  op->operands = {x.id(), y.id(), z.id()};
  return B(where).emit(std::move(op));
}

namespace {

Value random_op(const Operand& seed, const Operand& offsets, RandomDist dist, CallSite where) {
  const char* fn = dist == RandomDist::Normal ? "randn" : "rand";
  if (!seed.is_literal && use(*seed.value, fn, where).rank() != 0)
    fail_at(loc_of(where), "{}: the seed must be an integer scalar (one stream of numbers per seed), got {}; vary "
            "the offsets instead", fn, seed.value->type().str());
  if (seed.is_float || offsets.is_float)
    fail_at(loc_of(where), "{}: the seed and the offsets are integers (i32 or i64), got a fractional literal", fn);
  auto [s, off] = unify(seed, offsets, fn, where, /*keep_types=*/true);
  auto op = new_op(OpKind::Rand, where);
  op->random = dist;
  op->operands = {s.id(), off.id()};
  return B(where).emit(std::move(op));
}

} // namespace

Value rand(const Operand& seed, const Operand& offsets, CallSite w) {
  return random_op(seed, offsets, RandomDist::Uniform, w);
}
Value randn(const Operand& seed, const Operand& offsets, CallSite w) {
  return random_op(seed, offsets, RandomDist::Normal, w);
}

// ---- shapes ----

Value expand_dims(const Value& x, int axis, CallSite where) {
  use(x, "expand_dims", where);
  if (x.rank() == 0 && (axis == 0 || axis == -1)) // a scalar becomes a one-element tile: a broadcast
    return broadcast_to(x, Shape{1}, where);
  auto op = new_op(OpKind::ExpandDims, where);
  op->axis = axis < 0 ? axis + x.rank() + 1 : axis;
  op->operands = {x.id()};
  return B(where).emit(std::move(op));
}

Value broadcast_to(const Value& x, const Shape& target, CallSite where) {
  // A copy: callers pass shapes that live in the kernel's value table (ptr.shape()), which the
  // reshape below may reallocate.
  const Shape shape = target;
  Value v = use(x, "broadcast_to", where);
  if (v.rank() > 0 && v.rank() < static_cast<int>(shape.size())) { // numpy: missing leading dims are 1
    Shape padded(shape.size() - v.rank(), 1);
    padded.append(v.shape().begin(), v.shape().end());
    v = reshape(v, padded, where);
  }
  if (v.shape() == shape)
    return v;
  return declared(OpKind::Broadcast, v, v.type().with_shape(shape), where);
}

Value reshape(const Value& x, const Shape& shape, CallSite where) {
  if (use(x, "reshape", where).shape() == shape)
    return x;
  return declared(OpKind::Reshape, x, x.type().with_shape(shape), where);
}

Value trans(const Value& x, CallSite where) {
  auto op = new_op(OpKind::Trans, where);
  op->operands = {x.id()};
  return B(where).emit(std::move(op));
}

// ---- dot and reductions ----

Value dot(const Value& a, const Value& b, const Value& acc, bool tf32, CallSite where) {
  use(a, "dot", where);
  use(b, "dot", where);
  Value c = acc;
  if (!c.valid()) {
    if (a.rank() != 2 || b.rank() != 2)
      fail_at(loc_of(where), "dot: operands must be 2-D tiles, got a: {} and b: {}", a.type().str(), b.type().str());
    const DType acc_type = a.dtype() == DType::f64 ? DType::f64 : DType::f32;
    // Said of the dot, not of the accumulator it makes first.
    if (std::string why = why_tile_too_large(Type::tensor(acc_type, {a.shape()[0], b.shape()[1]})); !why.empty())
      fail_at(loc_of(where), "dot: its result would be {}", why);
    c = zeros({a.shape()[0], b.shape()[1]}, acc_type, where);
  }
  auto op = new_op(OpKind::Dot, where);
  op->tf32 = tf32;
  op->operands = {a.id(), b.id(), c.id()};
  return B(where).emit(std::move(op));
}
Value dot(const Value& a, const Value& b, CallSite where) { return dot(a, b, Value(), false, where); }

Value sum(const Value& x, int axis, bool keepdims, CallSite w) {
  return reduce(x, axis, keepdims, OpKind::Reduce, ReduceOp::Sum, w);
}
Value max(const Value& x, int axis, bool keepdims, CallSite w) {
  return reduce(x, axis, keepdims, OpKind::Reduce, ReduceOp::Max, w);
}
Value min(const Value& x, int axis, bool keepdims, CallSite w) {
  return reduce(x, axis, keepdims, OpKind::Reduce, ReduceOp::Min, w);
}
Value argmax(const Value& x, int axis, bool keepdims, CallSite w) {
  return reduce(x, axis, keepdims, OpKind::ArgMax, ReduceOp::Max, w);
}
Value prod(const Value& x, int axis, bool keepdims, CallSite w) {
  return reduce(x, axis, keepdims, OpKind::Reduce, ReduceOp::Prod, w);
}

namespace {
// A Scan op of x along axis, ready to emit.
std::unique_ptr<Op> scan_op(const Value& x, int axis, ReduceOp combine, bool reverse, CallSite where) {
  use(x, combine == ReduceOp::Combine ? "associative_scan" : "scan", where);
  auto op = new_op(OpKind::Scan, where);
  op->reduce = combine;
  op->axis = axis < 0 ? axis + x.rank() : axis;
  op->reverse = reverse;
  op->operands = {x.id()};
  return op;
}
} // namespace

Value scan(const Value& x, int axis, ReduceOp combine, bool reverse, CallSite where) {
  if (combine == ReduceOp::Combine)
    fail_at(loc_of(where), "scan: ReduceOp::Combine names a combine of the user's; pass it as a function to "
            "associative_scan(x, axis, [](Value a, Value b) {{ return ...; }})");
  return B(where).emit(scan_op(x, axis, combine, reverse, where));
}
Value associative_scan(const Value& x, int axis, const CombineFn& combine, bool reverse, CallSite where) {
  std::unique_ptr<Op> op = scan_op(x, axis, ReduceOp::Combine, reverse, where);
  if (!combine)
    fail_at(loc_of(where), "associative_scan: the combine is an empty std::function; pass a callable "
            "(Value a, Value b) -> Value");
  check_scan_operand(*op, B(where).kernel());
  B(where).build_combine(*op, x.dtype(where), combine, where);
  return B(where).emit(std::move(op));
}
Value cumsum(const Value& x, int axis, bool reverse, CallSite w) { return scan(x, axis, ReduceOp::Sum, reverse, w); }
Value cumprod(const Value& x, int axis, bool reverse, CallSite w) { return scan(x, axis, ReduceOp::Prod, reverse, w); }
Value sort(const Value& x, int axis, bool descending, CallSite where) {
  use(x, "sort", where);
  auto op = new_op(OpKind::Sort, where);
  op->axis = axis < 0 ? axis + x.rank() : axis;
  op->reverse = descending;
  op->operands = {x.id()};
  return B(where).emit(std::move(op));
}
Value cummax(const Value& x, int axis, bool reverse, CallSite w) { return scan(x, axis, ReduceOp::Max, reverse, w); }
Value cummin(const Value& x, int axis, bool reverse, CallSite w) { return scan(x, axis, ReduceOp::Min, reverse, w); }

// ---- control flow ----

void for_range(const Operand& lo, const Operand& hi, const Operand& step, const std::function<void(Value)>& body,
               CallSite where) {
  B(where).for_range(lo, hi, step, body, where);
}

void if_(const Value& cond, const std::function<void()>& then_body, const std::function<void()>& else_body,
         CallSite where) {
  B(where).if_(cond, then_body, else_body, where);
}

// ---- hints ----

Value multiple_of(const Value& x, int64_t divisor, CallSite where) {
  if (divisor <= 0)
    fail_at(loc_of(where), "multiple_of: divisor must be positive, got {}", divisor);
  use(x, "multiple_of", where);
  B(where).kernel().values[x.id()].divisibility = divisor;
  return x;
}

Value max_contiguous(const Value& x, int64_t run, CallSite where) {
  if (run <= 0)
    fail_at(loc_of(where), "max_contiguous: run length must be positive, got {}", run);
  use(x, "max_contiguous", where);
  B(where).kernel().values[x.id()].contiguity = run;
  return x;
}

void static_check(bool condition, const std::string& message, CallSite where) {
  if (!condition)
    fail_at(loc_of(where), "static_check failed: {}", message);
}

} // namespace kiln
