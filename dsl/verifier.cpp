#include "dsl/verifier.h"

#include "dsl/tile_limits.h"

#include <cmath>
#include <unordered_set>

namespace kiln {

namespace {

std::string_view scan_name(ReduceOp r);

struct Checker {
  const Op& op;
  const Kernel& k;

  const Type& ty(int i) const { return k.type(op.operands[i]); }

  std::string operands_str() const {
    std::string s;
    for (size_t i = 0; i < op.operands.size(); ++i)
      s += (i ? ", " : "") + k.type(op.operands[i]).str();
    return s;
  }

  template <typename... Args> [[noreturn]] void error(fmt::format_string<Args...> f, Args&&... args) const {
    std::string what = fmt::format(f, std::forward<Args>(args)...);
    // Arithmetic and reductions are named as the user wrote them (exp, add, sum), not by op kind.
    std::string_view name = op.kind == OpKind::Reduce   ? reduce_name(op.reduce)
                            : op.kind == OpKind::Scan   ? scan_name(op.reduce)
                            : op.kind == OpKind::Unary  ? unary_name(op.unary)
                            : op.kind == OpKind::Binary ? binary_name(op.binary)
                            : op.kind == OpKind::Rand && op.random == RandomDist::Normal ? std::string_view("randn")
                                                        : op_name(op.kind);
    fail_at(op.loc, "{}: {}", name, what);
  }

  void expect_operands(size_t n) const {
    if (op.operands.size() != n)
      throw InternalError(fmt::format("{} has {} operands, expected {}", op_name(op.kind), op.operands.size(), n));
  }
  void expect_tensor(int i, const char* role) const {
    if (!ty(i).is_tensor())
      error("{} must be a tensor or scalar, got {}", role, ty(i).str());
  }
  void expect_int_scalar(int i, const char* role) const {
    const Type& t = ty(i);
    if (!t.is_tensor() || !t.is_scalar() || !is_int(t.elem) || t.elem == DType::i1)
      error("{} must be an integer scalar (i32 or i64), got {}", role, t.str());
  }
  const Type& declared() const {
    if (op.results.empty())
      throw InternalError(fmt::format("{} needs a declared result type", op_name(op.kind)));
    return k.type(op.results[0]);
  }
};

// The DSL function that builds a scan with this combine.
std::string_view scan_name(ReduceOp r) {
  switch (r) {
  case ReduceOp::Sum:
    return "cumsum";
  case ReduceOp::Max:
    return "cummax";
  case ReduceOp::Min:
    return "cummin";
  case ReduceOp::Prod:
    return "cumprod";
  case ReduceOp::Combine:
    return "associative_scan";
  }
  return "scan";
}

bool same_order_permutation(const llvm::SmallVector<int, 4>& order, int rank) {
  if (static_cast<int>(order.size()) != rank)
    return false;
  llvm::SmallVector<bool, 4> seen(rank, false);
  for (int d : order) {
    if (d < 0 || d >= rank || seen[d])
      return false;
    seen[d] = true;
  }
  return true;
}

// The element types an atomic add (through pointers or a block pointer) takes.
void check_atomic_add_dtype(const Checker& c, DType elem) {
  if (elem != DType::f32 && elem != DType::i32 && elem != DType::f16 && elem != DType::i64 && elem != DType::f64)
    c.error("atomic_add supports f16, f32, f64, i32 and i64, got {}", dtype_name(elem));
}

std::optional<Type> infer_memory(const Checker& c) {
  const Op& op = c.op;
  switch (op.kind) {
  case OpKind::AddPtr: {
    c.expect_operands(2);
    if (!c.ty(0).is_pointer())
      c.error("the base must be a pointer, got {}", c.ty(0).str());
    if (!c.ty(1).is_tensor() || !is_int(c.ty(1).elem) || c.ty(1).elem == DType::i1)
      c.error("offsets must be integers, got {}", c.ty(1).str());
    if (c.ty(0).shape != c.ty(1).shape)
      c.error("pointer shape {} and offset shape {} differ", shape_str(c.ty(0).shape), shape_str(c.ty(1).shape));
    return c.ty(0);
  }
  case OpKind::Load: {
    c.expect_operands(op.has_mask ? 3 : 1);
    const Type& p = c.ty(0);
    if (!p.is_pointer())
      c.error("expected a tensor of pointers or a block pointer, got {}", p.str());
    Type result = Type::tensor(p.elem, p.shape);
    if (op.has_mask) {
      if (c.ty(1) != Type::tensor(DType::i1, p.shape))
        c.error("mask must be {} to match the pointers, got {}", Type::tensor(DType::i1, p.shape).str(),
                c.ty(1).str());
      if (c.ty(2) != result)
        c.error("`other` must be {} to match the pointers, got {}", result.str(), c.ty(2).str());
    }
    return result;
  }
  case OpKind::Store:
  case OpKind::AtomicAdd: {
    c.expect_operands(op.has_mask ? 3 : 2);
    const Type& p = c.ty(0);
    if (!p.is_pointer())
      c.error("expected a tensor of pointers, got {}", p.str());
    Type want = Type::tensor(p.elem, p.shape);
    if (c.ty(1) != want)
      c.error("value must be {} to match the pointers, got {}{}", want.str(), c.ty(1).str(),
              c.ty(1).shape == p.shape ? fmt::format(" (convert it with .to({}))", dtype_name(p.elem)) : "");
    if (op.has_mask && c.ty(2) != Type::tensor(DType::i1, p.shape))
      c.error("mask must be {} to match the pointers, got {}", Type::tensor(DType::i1, p.shape).str(),
              c.ty(2).str());
    if (op.kind == OpKind::AtomicAdd) {
      check_atomic_add_dtype(c, p.elem);
      return want;
    }
    return std::nullopt;
  }
  case OpKind::MakeBlockPtr: {
    const Type& bp = c.declared();
    int r = bp.rank();
    if (r < 1 || r > 3)
      c.error("block_shape must have rank 1 to 3, got {}", shape_str(bp.shape));
    c.expect_operands(1 + 3 * r);
    if (!c.ty(0).is_pointer() || !c.ty(0).is_scalar())
      c.error("base must be a pointer argument, got {}", c.ty(0).str());
    if (c.ty(0).elem != bp.elem)
      throw InternalError("block pointer element type differs from its base");
    for (int i = 1; i < 1 + 3 * r; ++i)
      c.expect_int_scalar(i, i <= r ? "shape" : i <= 2 * r ? "strides" : "offsets");
    for (int64_t d : bp.shape)
      if (!is_power_of_two(d))
        c.error("block_shape {} has a dim that is not a power of two; tile dims must be powers of two",
                shape_str(bp.shape));
    if (!same_order_permutation(bp.order, r))
      c.error("order ({}) must be a permutation of the {} block dims", fmt::join(bp.order, ", "), r);
    return bp;
  }
  case OpKind::Advance: {
    const Type& bp = c.ty(0);
    if (!bp.is_block_ptr())
      c.error("expected a block pointer, got {}", bp.str());
    if (static_cast<int>(op.operands.size()) != 1 + bp.rank())
      c.error("expected {} offsets for a rank-{} block pointer, got {}", bp.rank(), bp.rank(),
              op.operands.size() - 1);
    for (size_t i = 1; i < op.operands.size(); ++i)
      c.expect_int_scalar(static_cast<int>(i), "advance offsets");
    return bp;
  }
  case OpKind::LoadBlock:
  case OpKind::StoreBlock:
  case OpKind::AtomicAddBlock: {
    const Type& bp = c.ty(0);
    if (!bp.is_block_ptr())
      c.error("expected a block pointer, got {}", bp.str());
    llvm::SmallVector<bool, 4> seen(bp.rank(), false);
    for (int64_t d : op.checked_dims()) {
      if (d < 0 || d >= bp.rank())
        c.error("boundary_check dim {} is out of range for a rank-{} block ({}); valid dims are 0 to {}", d,
                bp.rank(), bp.str(), bp.rank() - 1);
      if (seen[d])
        c.error("boundary_check lists dim {} twice", d);
      seen[d] = true;
    }
    Type tile = Type::tensor(bp.elem, bp.shape);
    if (op.kind == OpKind::LoadBlock) {
      c.expect_operands(1);
      const double pad = op.padding.value;
      if (!is_float(bp.elem) && !int_dtype_holds(bp.elem, pad)) {
        auto [lo, hi] = int_range(bp.elem);
        c.error("padding {} needs a floating-point block, got {}; an integer block pads with an integer in its "
                "range ([{}, {}])", std::isnan(pad) ? "NaN" : fmt::format("{}", pad), dtype_name(bp.elem), lo, hi);
      }
      return tile;
    }
    c.expect_operands(2);
    if (c.ty(1) != tile)
      c.error("value must be {} to match the block pointer, got {}{}", tile.str(), c.ty(1).str(),
              c.ty(1).shape == bp.shape ? fmt::format(" (convert it with .to({}))", dtype_name(bp.elem)) : "");
    if (op.kind == OpKind::AtomicAddBlock)
      check_atomic_add_dtype(c, bp.elem);
    return std::nullopt;
  }
  default: break;
  }
  throw InternalError("infer_memory on a non-memory op");
}

std::optional<Type> infer_dot(const Checker& c) {
  const Op& op = c.op;
  c.expect_operands(3);
  const Type &a = c.ty(0), &b = c.ty(1), &acc = c.ty(2);
  if (a.is_block_ptr() || b.is_block_ptr())
    c.error("operands must be tiles, got a: {} and b: {}; load a block pointer first: dot(load(bp), ...)", a.str(),
            b.str());
  if (!a.is_tensor() || a.rank() != 2 || !b.is_tensor() || b.rank() != 2)
    c.error("operands must be 2-D tiles, got a: {} and b: {}", a.str(), b.str());
  if (a.shape[1] != b.shape[0])
    c.error("inner dimensions differ: a is {} (M={}, K={}) but b is {} (K={}); b must be (K, N)", a.str(),
            a.shape[0], a.shape[1], b.str(), b.shape[0]);
  if (a.elem != b.elem)
    c.error("operand dtypes differ: a is {}, b is {}; convert one with .to()", dtype_name(a.elem),
            dtype_name(b.elem));
  DType acc_t;
  switch (a.elem) {
  case DType::f16:
  case DType::bf16:
  case DType::f32: acc_t = DType::f32; break;
  case DType::f64: acc_t = DType::f64; break;
  default: c.error("unsupported operand dtype {}; dot takes f16, bf16, f32 or f64", dtype_name(a.elem));
  }
  if (op.tf32 && a.elem != DType::f32)
    c.error("tf32 applies to f32 operands only, got {}", dtype_name(a.elem));
  int64_t M = a.shape[0], N = b.shape[1], K = a.shape[1];
  if (M < 1 || N < 1 || K < 1)
    c.error("tiles must have at least one element in every dim, got M={}, N={}, K={}", M, N, K);
  Type result = Type::tensor(acc_t, {M, N});
  if (acc != result)
    c.error("accumulator must be {}, got {}", result.str(), acc.str());
  return result;
}

std::optional<Type> infer_control(const Checker& c) {
  const Op& op = c.op;
  if (op.kind == OpKind::For) {
    if (op.operands.size() < 3 || op.regions.size() != 1)
      throw InternalError("malformed for");
    for (int i = 0; i < 3; ++i)
      c.expect_int_scalar(i, i == 0 ? "lower bound" : i == 1 ? "upper bound" : "step");
    const Region& body = op.regions[0];
    size_t n = op.operands.size() - 3;
    if (body.args.size() != n + 1 || op.results.size() != n)
      throw InternalError("for: carried values, region args and results disagree");
    const Op* yield = body.ops.empty() ? nullptr : body.ops.back().get();
    if (!yield || yield->kind != OpKind::Yield || yield->operands.size() != n)
      throw InternalError("for: region must end in a yield of every carried value");
    for (size_t i = 0; i < n; ++i) {
      const Type& init = c.ty(static_cast<int>(3 + i));
      const Type& next = c.k.type(yield->operands[i]);
      if (init != next) {
        const std::string& name = c.k.info(op.results[i]).name;
        c.error("loop-carried variable{} changes type from {} to {} in the body; a carried value must keep "
                "its type (convert with .to())",
                name.empty() ? "" : " '" + name + "'", init.str(), next.str());
      }
      if (c.k.type(body.args[i + 1]) != init || c.k.type(op.results[i]) != init)
        throw InternalError("for: region arg or result type differs from init");
    }
    return std::nullopt;
  }
  if (op.kind == OpKind::If) {
    if (op.operands.size() != 1 || op.regions.size() != 2)
      throw InternalError("malformed if");
    if (c.ty(0) != Type::scalar(DType::i1))
      c.error("condition must be a scalar i1 (a comparison), got {}", c.ty(0).str());
    for (const Region& r : op.regions) {
      const Op* yield = r.ops.empty() ? nullptr : r.ops.back().get();
      if (!yield || yield->kind != OpKind::Yield || yield->operands.size() != op.results.size())
        throw InternalError("if: region must end in a yield of every result");
      for (size_t i = 0; i < op.results.size(); ++i)
        if (c.k.type(yield->operands[i]) != c.k.type(op.results[i])) {
          const std::string& name = c.k.info(op.results[i]).name;
          c.error("variable{} is {} in one branch and {} in the other; both branches must agree",
                  name.empty() ? "" : " '" + name + "'", c.k.type(op.results[i]).str(),
                  c.k.type(yield->operands[i]).str());
        }
    }
    return std::nullopt;
  }
  return std::nullopt; // yield: checked by its parent
}

} // namespace

void check_scan_operand(const Op& op, const Kernel& k) {
  const Checker c{op, k};
  c.expect_operands(1);
  c.expect_tensor(0, "operand");
  const Type& x = c.ty(0);
  const char* verb = op.kind == OpKind::Sort ? "sort" : "scan";
  if (x.rank() == 0)
    c.error("cannot {0} a scalar ({1}); {0}s take a tile of rank 1 or more", verb, x.str());
  if (op.axis < 0 || op.axis >= x.rank())
    c.error("axis {} is out of range for {} (rank {}); valid axes are 0 to {} (or negative from the end)",
            op.axis, x.str(), x.rank(), x.rank() - 1);
  if (x.elem == DType::i1)
    c.error("cannot {} booleans; convert with .to(i32)", verb);
}

namespace {

std::optional<Type> infer_type_by_kind(const Op& op, const Kernel& k) {
  Checker c{op, k};
  switch (op.kind) {
  case OpKind::Constant: {
    const Type& t = c.declared();
    if (!t.is_tensor())
      c.error("constants must be numbers, got {}", t.str());
    for (int64_t d : t.shape)
      if (!is_power_of_two(d))
        c.error("shape {} has a dim that is not a power of two; tile dims must be powers of two",
                shape_str(t.shape));
    return t;
  }
  case OpKind::Arange: {
    if (op.ints.size() != 2)
      throw InternalError("arange needs its bounds in ints");
    int64_t lo = op.ints[0], hi = op.ints[1];
    if (hi <= lo)
      c.error("range [{}, {}) is empty; hi must exceed lo", lo, hi);
    if (!is_power_of_two(hi - lo))
      c.error("range [{}, {}) has {} elements, not a power of two; tile dims must be powers of two", lo, hi,
              hi - lo);
    return Type::tensor(DType::i32, {hi - lo});
  }
  case OpKind::ProgramId:
  case OpKind::NumPrograms:
    if (op.axis < 0 || op.axis > 2)
      c.error("axis must be 0, 1 or 2, got {}", op.axis);
    return Type::scalar(DType::i32);
  case OpKind::Broadcast: {
    c.expect_operands(1);
    const Type& x = c.ty(0);
    const Type& t = c.declared();
    if (x.is_block_ptr() || t.is_block_ptr())
      c.error("cannot broadcast a block pointer ({}); load it first", x.str());
    if (x.elem != t.elem || x.kind != t.kind || (x.rank() != t.rank() && x.rank() != 0))
      c.error("cannot broadcast {} to {}: the target must have the same rank (or the source be a scalar)",
              x.str(), t.str());
    for (int64_t d : t.shape)
      if (!is_power_of_two(d))
        c.error("target shape {} has a dim that is not a power of two; tile dims must be powers of two",
                shape_str(t.shape));
    if (x.rank() == 0) // a scalar splats to any shape
      return t;
    for (int i = 0; i < x.rank(); ++i)
      if (x.shape[i] != t.shape[i] && x.shape[i] != 1)
        c.error("cannot broadcast shape {} to {}: dim {} is {}, not 1 or {}", shape_str(x.shape),
                shape_str(t.shape), i, x.shape[i], t.shape[i]);
    return t;
  }
  case OpKind::ExpandDims: {
    c.expect_operands(1);
    const Type& x = c.ty(0);
    if (x.is_block_ptr())
      c.error("cannot expand a block pointer");
    if (op.axis < 0 || op.axis > x.rank())
      c.error("axis {} is out of range for {} (rank {})", op.axis, x.str(), x.rank());
    Shape s = x.shape;
    s.insert(s.begin() + op.axis, 1);
    return x.with_shape(s);
  }
  case OpKind::Reshape: {
    c.expect_operands(1);
    const Type& t = c.declared();
    if (c.ty(0).is_block_ptr())
      c.error("cannot reshape a block pointer ({}); load it first", c.ty(0).str());
    if (c.ty(0).numel() != t.numel())
      c.error("cannot reshape {} to {}: element counts differ ({} vs {})", c.ty(0).str(), shape_str(t.shape),
              c.ty(0).numel(), t.numel());
    return t;
  }
  case OpKind::Trans: {
    c.expect_operands(1);
    const Type& x = c.ty(0);
    if (x.rank() != 2 || x.is_block_ptr())
      c.error("trans takes a 2-D tile, got {} (rank {}); for other ranks use reshape or expand_dims", x.str(),
              x.rank());
    return x.with_shape({x.shape[1], x.shape[0]});
  }
  case OpKind::Unary: {
    c.expect_operands(1);
    c.expect_tensor(0, "operand");
    DType t = c.ty(0).elem;
    switch (op.unary) {
    case UnaryOp::Not:
      if (t != DType::i1)
        c.error("takes a boolean (i1) operand, got {}; for numbers compare instead (x == 0)", c.ty(0).str());
      break;
    case UnaryOp::Neg:
    case UnaryOp::Abs:
      if (t == DType::i1)
        c.error("takes a number, got {}{}", c.ty(0).str(),
                op.unary == UnaryOp::Neg ? "; to negate a boolean use `!`" : "; convert it with .to(i32)");
      break;
    case UnaryOp::Exp:
    case UnaryOp::Exp2:
    case UnaryOp::Log:
    case UnaryOp::Log2:
    case UnaryOp::Sqrt:
    case UnaryOp::Rsqrt:
    case UnaryOp::Tanh:
    case UnaryOp::Sigmoid:
    case UnaryOp::Erf:
    case UnaryOp::Sin:
    case UnaryOp::Cos:
    case UnaryOp::Log1p:
    case UnaryOp::Expm1:
      if (!is_float(t))
        c.error("takes a floating-point operand, got {}; convert it with .to(f32)", c.ty(0).str());
    }
    return c.ty(0);
  }
  case OpKind::Binary: {
    c.expect_operands(2);
    c.expect_tensor(0, "left operand");
    c.expect_tensor(1, "right operand");
    if (c.ty(0) != c.ty(1))
      c.error("operands differ: {} vs {}", c.ty(0).str(), c.ty(1).str());
    DType t = c.ty(0).elem;
    if ((op.binary == BinaryOp::And || op.binary == BinaryOp::Or) && is_float(t))
      c.error("takes booleans or integers, got {}", c.ty(0).str());
    if (op.binary == BinaryOp::Pow && !is_float(t))
      c.error("takes floating-point operands, got {}; convert them with .to(f32)", c.ty(0).str());
    if (!is_comparison(op.binary) && op.binary != BinaryOp::And && op.binary != BinaryOp::Or && t == DType::i1)
      c.error("takes numbers, got booleans ({}); convert them with .to(i32)", c.ty(0).str());
    return is_comparison(op.binary) ? c.ty(0).with_elem(DType::i1) : c.ty(0);
  }
  case OpKind::Cast: {
    c.expect_operands(1);
    c.expect_tensor(0, "operand");
    const Type& t = c.declared();
    if (t.shape != c.ty(0).shape || !t.is_tensor())
      throw InternalError("cast changes shape");
    return t;
  }
  case OpKind::Where: {
    c.expect_operands(3);
    if (c.ty(0).elem != DType::i1 || !c.ty(0).is_tensor())
      c.error("condition must be boolean (i1), got {}", c.ty(0).str());
    if (c.ty(1) != c.ty(2))
      c.error("branches differ: {} vs {}", c.ty(1).str(), c.ty(2).str());
    if (c.ty(0).shape != c.ty(1).shape)
      c.error("condition shape {} differs from value shape {}", shape_str(c.ty(0).shape), shape_str(c.ty(1).shape));
    return c.ty(1);
  }
  case OpKind::Fma: {
    c.expect_operands(3);
    for (int i : {0, 1, 2})
      c.expect_tensor(i, i == 0 ? "a" : i == 1 ? "b" : "c");
    if (c.ty(0) != c.ty(1) || c.ty(0) != c.ty(2))
      c.error("operands differ: {}", c.operands_str());
    if (!is_float(c.ty(0).elem))
      c.error("takes floating-point operands, got {}; convert them with .to(f32)", c.ty(0).str());
    return c.ty(0);
  }
  case OpKind::Rand: {
    c.expect_operands(2);
    c.expect_tensor(0, "seed");
    c.expect_tensor(1, "offsets");
    for (int i : {0, 1})
      if (!is_int(c.ty(i).elem) || c.ty(i).elem == DType::i1)
        c.error("the {} must be integers (i32 or i64), got {}; convert with .to(i32)", i ? "offsets" : "seed",
                c.ty(i).str());
    if (c.ty(0).shape != c.ty(1).shape)
      c.error("seed shape {} differs from offsets shape {}", shape_str(c.ty(0).shape), shape_str(c.ty(1).shape));
    return c.ty(1).with_elem(DType::f32);
  }
  case OpKind::Dot: return infer_dot(c);
  case OpKind::Reduce:
  case OpKind::ArgMax: {
    c.expect_operands(1);
    c.expect_tensor(0, "operand");
    const Type& x = c.ty(0);
    if (x.rank() == 0)
      c.error("cannot reduce a scalar ({}); reductions take a tile of rank 1 or more", x.str());
    if (op.axis < 0 || op.axis >= x.rank())
      c.error("axis {} is out of range for {} (rank {}); valid axes are 0 to {} (or negative from the end)",
              op.axis, x.str(), x.rank(), x.rank() - 1);
    if (x.elem == DType::i1)
      c.error("cannot reduce booleans; convert with .to(i32)");
    if (op.reduce == ReduceOp::Combine || !op.regions.empty())
      throw InternalError(fmt::format("a reduction with a combine region at {}", op.loc.str()));
    Shape s = x.shape;
    if (op.keepdims)
      s[op.axis] = 1;
    else
      s.erase(s.begin() + op.axis);
    return Type::tensor(op.kind == OpKind::ArgMax ? DType::i32 : x.elem, s);
  }
  case OpKind::Sort:
    check_scan_operand(op, k);
    return c.ty(0);
  case OpKind::Scan: {
    check_scan_operand(op, k);
    const Type& x = c.ty(0);
    if (op.reduce == ReduceOp::Combine)
      check_combine(op, k);
    else if (!op.regions.empty())
      throw InternalError(fmt::format("scan {} at {} has a region", reduce_name(op.reduce), op.loc.str()));
    return x;
  }
  case OpKind::AddPtr:
  case OpKind::Load:
  case OpKind::Store:
  case OpKind::AtomicAdd:
  case OpKind::MakeBlockPtr:
  case OpKind::Advance:
  case OpKind::LoadBlock:
  case OpKind::StoreBlock:
  case OpKind::AtomicAddBlock: return infer_memory(c);
  case OpKind::For:
  case OpKind::If:
  case OpKind::Yield: return infer_control(c);
  }
  throw InternalError("unknown op kind");
}

} // namespace

std::optional<Type> infer_result_type(const Op& op, const Kernel& k) {
  std::optional<Type> t = infer_type_by_kind(op, k);
  if (t) // every tile the kernel makes, whatever op makes it (dsl/tile_limits.h)
    if (std::string why = why_tile_too_large(*t); !why.empty())
      Checker{op, k}.error("{}", why);
  return t;
}

namespace {

// `defined`: values visible at this point; `ever`: every value defined anywhere so far, so that a
// value defined twice is caught.
void verify_region(const Region& r, const Kernel& k, std::unordered_set<ValueId>& defined,
                   std::unordered_set<ValueId>& ever) {
  auto define = [&](ValueId v, const Op* by) {
    if (v < 0 || static_cast<size_t>(v) >= k.values.size())
      throw InternalError(fmt::format("{} defines %{}, which is not a value of the kernel",
                                      by ? op_name(by->kind) : std::string_view("a region"), v));
    if (!ever.insert(v).second)
      throw InternalError(fmt::format("%{} is defined twice (again by {})", v,
                                      by ? op_name(by->kind) : std::string_view("a region argument")));
    defined.insert(v);
  };
  for (ValueId a : r.args)
    define(a, nullptr);
  for (const auto& op : r.ops) {
    for (ValueId v : op->operands)
      if (!defined.count(v))
        throw InternalError(fmt::format("{} at {} uses %{} before it is defined", op_name(op->kind),
                                        op->loc.str(), v));
    if (op->kind == OpKind::Yield && op.get() != r.ops.back().get())
      throw InternalError("yield must end its region");
    for (const Region& sub : op->regions) {
      std::unordered_set<ValueId> inner = defined; // values defined inside do not escape
      verify_region(sub, k, inner, ever);
    }
    // The builder checked every op as it was made, so an ill-typed op here was broken by kiln
    // (a pass, or hand-made IR), not by the user.
    std::optional<Type> t;
    try {
      t = infer_result_type(*op, k);
    } catch (const Error& e) {
      throw InternalError(fmt::format("verify: ill-typed IR: {}", e.what()));
    }
    if (op->kind != OpKind::For && op->kind != OpKind::If) {
      if (t.has_value() != !op->results.empty() || (t && k.type(op->results[0]) != *t))
        throw InternalError(fmt::format("{} at {}: result type differs from its inferred type",
                                        op_name(op->kind), op->loc.str()));
    }
    for (ValueId v : op->results)
      define(v, op.get());
  }
}

} // namespace

void verify(const Kernel& k) {
  std::unordered_set<ValueId> defined, ever;
  for (const Param& p : k.params) {
    if (p.value < 0 || static_cast<size_t>(p.value) >= k.values.size())
      throw InternalError(fmt::format("parameter '{}' is not a value of the kernel", p.name));
    defined.insert(p.value);
    ever.insert(p.value);
  }
  verify_region(k.body, k, defined, ever);
}

} // namespace kiln
