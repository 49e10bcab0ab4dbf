#include "dsl/differentiate.h"

#include "dsl/dsl.h"

#include <cmath>
#include <unordered_map>

namespace kiln {

namespace {

constexpr double kLn2 = 0.6931471805599453;
constexpr double kTwoOverSqrtPi = 1.1283791670955126;

// A value's tangent: 0 (the value does not depend on x), 1 (the value is x), or a tile of derivatives.
// Keeping 0 and 1 symbolic spares the multiplies by ones an expression like `s + bias` would otherwise build.
struct Tangent {
  enum Kind { Zero, One, Tile } kind = Zero;
  Value tile; // f32, the shape of the value it belongs to (or broadcastable to it)

  static Tangent zero() { return {}; }
  static Tangent one() { return {One, Value()}; }
  static Tangent of(Value v) { return {Tile, std::move(v)}; }
  bool is_zero() const { return kind == Zero; }
};

Value as_f32(const Value& v) { return v.dtype() == DType::f32 ? v : v.to(f32); }

Value materialize(const Tangent& t) {
  if (t.kind == Tangent::Tile)
    return t.tile;
  return scalar(t.kind == Tangent::One ? 1.0 : 0.0, f32);
}

// t · x, with x a value of the expression (any float dtype).
Tangent times(const Tangent& t, const Value& x) {
  if (t.is_zero())
    return t;
  return Tangent::of(t.kind == Tangent::One ? as_f32(x) : t.tile * as_f32(x));
}

Tangent plus(const Tangent& a, const Tangent& b) {
  if (a.is_zero())
    return b;
  if (b.is_zero())
    return a;
  return Tangent::of(materialize(a) + materialize(b));
}

Tangent negated(const Tangent& t) { return t.is_zero() ? t : Tangent::of(-materialize(t)); }

// A shape op (broadcast, expand_dims, reshape, trans) applied to a tile tangent; 0 and 1 stay as they are.
template <typename Fn> Tangent reshaped(const Tangent& t, Fn&& fn) {
  return t.kind == Tangent::Tile ? Tangent::of(fn(t.tile)) : t;
}

class Differentiator {
public:
  Differentiator(KernelBuilder& kb, ValueId x, std::string what) : kb_(kb), x_(x), what_(std::move(what)) {}

  Tangent tangent(ValueId v) {
    if (v == x_)
      return Tangent::one();
    if (v < x_) // built before x: cannot depend on it
      return Tangent::zero();
    auto it = memo_.find(v);
    if (it != memo_.end())
      return it->second;
    Tangent t = compute(v);
    memo_.emplace(v, t);
    return t;
  }

private:
  KernelBuilder& kb_;
  ValueId x_;
  std::string what_;
  std::unordered_map<ValueId, Tangent> memo_;

  Value value(ValueId v) { return kb_.make(v); }

  [[noreturn]] void not_differentiable(const Op& op, const std::string& detail) {
    std::string name(op_name(op.kind));
    if (op.kind == OpKind::Unary)
      name = std::string(unary_name(op.unary));
    else if (op.kind == OpKind::Binary)
      name = std::string(binary_name(op.binary));
    else if (op.kind == OpKind::Reduce || op.kind == OpKind::Scan)
      name += std::string(" ") + std::string(reduce_name(op.reduce));
    fail_at(op.loc,
            "{}: cannot differentiate op '{}' with respect to the score: {}; expected elementwise ops "
            "(arithmetic, "
            "exp, log, tanh, where, ...), or give the mod's derivative explicitly",
            what_, name, detail);
  }

  Tangent compute(ValueId v) {
    const ValueInfo& info = kb_.kernel().info(v);
    const Op* op = info.def;
    if (op == nullptr) // a kernel argument or a region argument
      return Tangent::zero();
    if (!info.type.is_tensor() || !is_float(info.type.elem))
      return Tangent::zero(); // comparisons, indices, pointers: steps or constants
    llvm::SmallVector<Tangent, 4> in;
    bool any = false;
    for (ValueId o : op->operands) {
      in.push_back(tangent(o));
      any = any || !in.back().is_zero();
    }
    const bool is_control_flow = op->kind == OpKind::For || op->kind == OpKind::If;
    if (!any && !is_control_flow)
      return Tangent::zero();
    const Value y = value(v);
    auto arg = [&](size_t i) { return value(op->operands[i]); };
    switch (op->kind) {
    case OpKind::Broadcast:
      return reshaped(in[0], [&](const Value& t) { return broadcast_to(t, y.shape()); });
    case OpKind::ExpandDims:
      return reshaped(in[0], [&](const Value& t) { return expand_dims(t, op->axis); });
    case OpKind::Reshape:
      return reshaped(in[0], [&](const Value& t) { return reshape(t, y.shape()); });
    case OpKind::Trans:
      return reshaped(in[0], [&](const Value& t) { return trans(t); });
    case OpKind::Cast: // float to float: rounding passes the derivative through
      return in[0];
    case OpKind::Where:
      return Tangent::of(where(arg(0), broadcast_to(materialize(in[1]), y.shape()), materialize(in[2])));
    case OpKind::Fma:
      return plus(plus(times(in[0], arg(1)), times(in[1], arg(0))), in[2]);
    case OpKind::Unary:
      return unary(*op, in[0], arg(0), y);
    case OpKind::Binary:
      return binary(*op, in[0], in[1], arg(0), arg(1), y);
    case OpKind::Reduce:
    case OpKind::Scan:
    case OpKind::Sort:
    case OpKind::ArgMax:
      not_differentiable(*op, "it combines elements across the tile, so it is not elementwise");
    case OpKind::Dot:
      not_differentiable(*op, "a matrix product is not elementwise");
    case OpKind::For:
    case OpKind::If:
      not_differentiable(*op, "control flow inside a mod has no derivative rule; use where() instead of if_");
    default:
      not_differentiable(*op, "no derivative rule for this op");
    }
  }

  Tangent unary(const Op& op, const Tangent& t, const Value& x, const Value& y) {
    switch (op.unary) {
    case UnaryOp::Neg:
      return negated(t);
    case UnaryOp::Exp:
      return times(t, y);
    case UnaryOp::Exp2:
      return times(t, y * kLn2);
    case UnaryOp::Log:
      return times(t, 1.0 / as_f32(x));
    case UnaryOp::Log2:
      return times(t, 1.0 / (as_f32(x) * kLn2));
    case UnaryOp::Sqrt:
      return times(t, 0.5 / as_f32(y));
    case UnaryOp::Rsqrt: { // d x^(-1/2) = -1/2 x^(-3/2) = -1/2 y^3
      Value y32 = as_f32(y);
      return times(t, y32 * y32 * y32 * -0.5);
    }
    case UnaryOp::Abs:
      return times(t, where(as_f32(x) < 0.0, -1.0, 1.0));
    case UnaryOp::Tanh: {
      Value y32 = as_f32(y);
      return times(t, 1.0 - y32 * y32);
    }
    case UnaryOp::Sigmoid: {
      Value y32 = as_f32(y);
      return times(t, y32 * (1.0 - y32));
    }
    case UnaryOp::Erf: {
      Value x32 = as_f32(x);
      return times(t, exp(-(x32 * x32)) * kTwoOverSqrtPi);
    }
    case UnaryOp::Sin:
      return times(t, cos(as_f32(x)));
    case UnaryOp::Cos:
      return times(t, -sin(as_f32(x)));
    case UnaryOp::Log1p:
      return times(t, 1.0 / (as_f32(x) + 1.0));
    case UnaryOp::Expm1:
      return times(t, as_f32(y) + 1.0);
    case UnaryOp::Not:
      return Tangent::zero();
    }
    not_differentiable(op, "no derivative rule for this op");
  }

  Tangent binary(const Op& op, const Tangent& ta, const Tangent& tb, const Value& a, const Value& b,
                 const Value& y) {
    switch (op.binary) {
    case BinaryOp::Add:
      return plus(ta, tb);
    case BinaryOp::Sub:
      return plus(ta, negated(tb));
    case BinaryOp::Mul:
      return plus(times(ta, b), times(tb, a));
    case BinaryOp::Div: // (a/b)' = a'/b - b' a/b²
      return plus(times(ta, 1.0 / as_f32(b)), times(negated(tb), as_f32(y) / as_f32(b)));
    case BinaryOp::Min:
    case BinaryOp::Max: { // the derivative of the operand that wins (a on ties)
      Value a_wins = op.binary == BinaryOp::Min ? a <= b : a >= b;
      return Tangent::of(where(a_wins, broadcast_to(materialize(ta), y.shape()), materialize(tb)));
    }
    case BinaryOp::Pow: { // (a^b)' = a' b a^(b-1) + b' a^b ln a
      Tangent by_base = times(ta, as_f32(b) * pow(as_f32(a), as_f32(b) - 1.0));
      Tangent by_exponent = tb.is_zero() ? tb : times(tb, as_f32(y) * log(as_f32(a)));
      return plus(by_base, by_exponent);
    }
    case BinaryOp::Rem:
      if (tb.is_zero()) // a mod c, c constant: slope 1 between the jumps
        return ta;
      not_differentiable(op, "a remainder by a value that depends on the score");
    default:
      not_differentiable(op, "no derivative rule for this op");
    }
  }
};

} // namespace

Value derivative_of(const Value& y, const Value& x, const std::string& what, CallSite where) {
  KernelBuilder& kb = KernelBuilder::current(where);
  if (!x.valid() || !y.valid())
    fail_at(loc_of(where), "{}: derivative of an empty Value", what);
  if (!is_float(x.dtype()) || !is_float(y.dtype()))
    fail_at(loc_of(where), "{}: derivative of {} with respect to {}; expected float values", what,
            y.type().str(), x.type().str());
  Differentiator d(kb, x.id(), what);
  const Tangent t = d.tangent(y.id());
  return t.kind == Tangent::One ? Value() : materialize(t);
}

} // namespace kiln
