#include "dsl/ir.h"

#include <algorithm>
#include <cmath>

namespace kiln {

ValueId Kernel::new_value(Type t, std::string n) {
  values.push_back(ValueInfo{std::move(t), std::move(n)});
  return static_cast<ValueId>(values.size() - 1);
}

std::string_view op_name(OpKind k) {
  switch (k) {
  case OpKind::Constant:
    return "constant";
  case OpKind::Arange:
    return "arange";
  case OpKind::ProgramId:
    return "program_id";
  case OpKind::NumPrograms:
    return "num_programs";
  case OpKind::Broadcast:
    return "broadcast";
  case OpKind::ExpandDims:
    return "expand_dims";
  case OpKind::Reshape:
    return "reshape";
  case OpKind::Trans:
    return "trans";
  case OpKind::Unary:
    return "unary";
  case OpKind::Binary:
    return "binary";
  case OpKind::Cast:
    return "cast";
  case OpKind::Where:
    return "where";
  case OpKind::Fma:
    return "fma";
  case OpKind::Rand:
    return "rand";
  case OpKind::Dot:
    return "dot";
  case OpKind::Reduce:
    return "reduce";
  case OpKind::ArgMax:
    return "argmax";
  case OpKind::Scan:
    return "scan";
  case OpKind::Sort:
    return "sort";
  case OpKind::AddPtr:
    return "addptr";
  case OpKind::Load:
    return "load";
  case OpKind::Store:
    return "store";
  case OpKind::AtomicAdd:
    return "atomic_add";
  case OpKind::MakeBlockPtr:
    return "make_block_ptr";
  case OpKind::Advance:
    return "advance";
  case OpKind::LoadBlock:
    return "load_block";
  case OpKind::StoreBlock:
    return "store_block";
  case OpKind::AtomicAddBlock:
    return "atomic_add_block";
  case OpKind::For:
    return "for";
  case OpKind::If:
    return "if";
  case OpKind::Yield:
    return "yield";
  }
  return "?";
}

std::string_view unary_name(UnaryOp u) {
  switch (u) {
  case UnaryOp::Neg:
    return "neg";
  case UnaryOp::Not:
    return "not";
  case UnaryOp::Exp:
    return "exp";
  case UnaryOp::Exp2:
    return "exp2";
  case UnaryOp::Log:
    return "log";
  case UnaryOp::Log2:
    return "log2";
  case UnaryOp::Sqrt:
    return "sqrt";
  case UnaryOp::Rsqrt:
    return "rsqrt";
  case UnaryOp::Abs:
    return "abs";
  case UnaryOp::Tanh:
    return "tanh";
  case UnaryOp::Sigmoid:
    return "sigmoid";
  case UnaryOp::Erf:
    return "erf";
  case UnaryOp::Sin:
    return "sin";
  case UnaryOp::Cos:
    return "cos";
  case UnaryOp::Log1p:
    return "log1p";
  case UnaryOp::Expm1:
    return "expm1";
  }
  return "?";
}

std::string_view binary_name(BinaryOp b) {
  switch (b) {
  case BinaryOp::Add:
    return "add";
  case BinaryOp::Sub:
    return "sub";
  case BinaryOp::Mul:
    return "mul";
  case BinaryOp::Div:
    return "div";
  case BinaryOp::Rem:
    return "rem";
  case BinaryOp::Min:
    return "min";
  case BinaryOp::Max:
    return "max";
  case BinaryOp::Pow:
    return "pow";
  case BinaryOp::And:
    return "and";
  case BinaryOp::Or:
    return "or";
  case BinaryOp::Eq:
    return "eq";
  case BinaryOp::Ne:
    return "ne";
  case BinaryOp::Lt:
    return "lt";
  case BinaryOp::Le:
    return "le";
  case BinaryOp::Gt:
    return "gt";
  case BinaryOp::Ge:
    return "ge";
  }
  return "?";
}

bool operator==(Padding a, Padding b) {
  if (std::isnan(a.value) || std::isnan(b.value))
    return std::isnan(a.value) && std::isnan(b.value);
  return a.value == b.value && std::signbit(a.value) == std::signbit(b.value);
}

std::string padding_name(Padding p) {
  if (p == Padding::Zero)
    return "zero";
  if (p == Padding::NaN)
    return "nan";
  if (p == Padding::NegInf)
    return "neginf";
  return fmt::format("{}", p.value);
}

std::string_view reduce_name(ReduceOp r) {
  switch (r) {
  case ReduceOp::Sum:
    return "sum";
  case ReduceOp::Max:
    return "max";
  case ReduceOp::Min:
    return "min";
  case ReduceOp::Prod:
    return "prod";
  case ReduceOp::Combine:
    return "combine";
  }
  return "?";
}

int64_t Op::arange_lo() const {
  KILN_INTERNAL_CHECK(kind == OpKind::Arange && ints.size() == 2, "arange_lo on a {} op", op_name(kind));
  return ints[0];
}

int64_t Op::arange_hi() const {
  KILN_INTERNAL_CHECK(kind == OpKind::Arange && ints.size() == 2, "arange_hi on a {} op", op_name(kind));
  return ints[1];
}

llvm::ArrayRef<int64_t> Op::checked_dims() const {
  KILN_INTERNAL_CHECK(kind == OpKind::LoadBlock || kind == OpKind::StoreBlock || kind == OpKind::AtomicAddBlock,
                      "checked_dims on a {} op",
                      op_name(kind));
  return ints;
}

bool Op::checks_dim(int64_t dim) const {
  llvm::ArrayRef<int64_t> dims = checked_dims();
  return std::find(dims.begin(), dims.end(), dim) != dims.end();
}

std::optional<int64_t> Op::exact_int() const {
  KILN_INTERNAL_CHECK(kind == OpKind::Constant, "exact_int on a {} op", op_name(kind));
  return ints.empty() ? std::nullopt : std::optional<int64_t>(ints[0]);
}

} // namespace kiln
