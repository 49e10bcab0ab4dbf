// The DSL's memory functions: load, store and atomic_add through tensors of pointers (masks and `other`
// broadcast to the pointers' shape), make_block_ptr and advance, and load and store through block pointers
// (boundary_check and padding).
#include "dsl/dsl.h"

#include "dsl/dsl_detail.h"

namespace kiln {

using namespace dsl_detail;

namespace {

llvm::SmallVector<ValueId, 4> int_scalars(llvm::ArrayRef<Operand> xs, const char* role, CallSite where) {
  llvm::SmallVector<ValueId, 4> ids;
  for (const Operand& o : xs) {
    Value v = o.is_literal ? B(where).operand(o, DType::i32) : use(*o.value, role, where);
    if (!v.type().is_tensor() || !v.type().is_scalar() || !is_int(v.dtype()) || v.dtype() == DType::i1)
      fail_at(loc_of(where), "{} must be integer scalars (i32 or i64), got {}", role, v.type().str());
    ids.push_back(v.id());
  }
  return ids;
}

} // namespace

Value load(const Value& ptrs, const Value& mask, const Operand& other, CallSite where) {
  const Type& pt = use(ptrs, "load", where).type();
  if (!pt.is_pointer())
    fail_at(loc_of(where), "load: a mask needs a tensor of pointers, got {}{}", pt.str(),
            pt.is_block_ptr() ? "; block pointers take boundary_check and padding instead: load(bp, {0, 1})" : "");
  use(mask, "load", where);
  Shape s = broadcast_shape(pt.shape, mask.shape(), "load", where, "pointers'", "mask's");
  Value p = broadcast_to(ptrs, s, where);
  Value m = broadcast_to(mask, s, where);
  Value o = other.is_literal ? B(where).operand(other, ptrs.dtype()) : use(*other.value, "load", where);
  if (o.type().is_tensor() && o.dtype() != ptrs.dtype() && other.is_literal)
    o = o.to(ptrs.dtype(), where);
  if (broadcast_shape(s, o.shape(), "load", where, "pointers'", "`other`'s") != s)
    fail_at(loc_of(where), "load: `other` has shape {}, larger than the pointers' shape {}", shape_str(o.shape()),
            shape_str(s));
  o = broadcast_to(o, s, where);
  auto op = new_op(OpKind::Load, where);
  op->has_mask = true;
  op->operands = {p.id(), m.id(), o.id()};
  return B(where).emit(std::move(op));
}

void store(const Value& ptrs, const Value& value, const Value& mask, CallSite where) {
  const Type& pt = use(ptrs, "store", where).type();
  if (!pt.is_pointer())
    fail_at(loc_of(where), "store: a mask needs a tensor of pointers, got {}{}", pt.str(),
            pt.is_block_ptr() ? "; block pointers take boundary_check instead: store(bp, value, {0, 1})" : "");
  use(value, "store", where);
  use(mask, "store", where);
  Shape s = broadcast_shape(broadcast_shape(pt.shape, mask.shape(), "store", where, "pointers'", "mask's"),
                            value.shape(), "store", where, "pointers'", "value's");
  auto op = new_op(OpKind::Store, where);
  op->has_mask = true;
  op->operands = {broadcast_to(ptrs, s, where).id(), broadcast_to(value, s, where).id(),
                  broadcast_to(mask, s, where).id()};
  B(where).emit(std::move(op));
}

Value atomic_add(const Value& ptrs, const Value& value, const Value& mask, CallSite where) {
  use(ptrs, "atomic_add", where);
  use(value, "atomic_add", where);
  if (ptrs.type().is_block_ptr()) {
    if (mask.valid())
      fail_at(loc_of(where),
              "atomic_add: a mask needs a tensor of pointers, got {}; block pointers take boundary_check instead: "
              "atomic_add(bp, value, {{0, 1}})",
              ptrs.type().str());
    atomic_add(ptrs, value, BoundaryCheck{}, where);
    return Value();
  }
  auto op = new_op(OpKind::AtomicAdd, where);
  Shape s = broadcast_shape(ptrs.shape(), value.shape(), "atomic_add", where, "pointers'", "value's");
  if (mask.valid())
    s = broadcast_shape(s, use(mask, "atomic_add", where).shape(), "atomic_add", where, "pointers'", "mask's");
  op->operands = {broadcast_to(ptrs, s, where).id(), broadcast_to(value, s, where).id()};
  if (mask.valid()) {
    op->has_mask = true;
    op->operands.push_back(broadcast_to(mask, s, where).id());
  }
  return B(where).emit(std::move(op));
}

Value make_block_ptr(const Value& base, llvm::ArrayRef<Operand> shape, llvm::ArrayRef<Operand> strides,
                     llvm::ArrayRef<Operand> offsets, const Shape& block_shape, llvm::ArrayRef<int> order,
                     CallSite where) {
  size_t r = block_shape.size();
  if (shape.size() != r || strides.size() != r || offsets.size() != r || order.size() != r)
    fail_at(loc_of(where),
            "make_block_ptr: shape, strides, offsets and order must each have one entry per block dim ({} for "
            "block_shape {}); got {}, {}, {} and {}",
            r, shape_str(block_shape), shape.size(), strides.size(), offsets.size(), order.size());
  const Type& bt = use(base, "make_block_ptr", where).type();
  if (!bt.is_pointer() || !bt.is_scalar())
    fail_at(loc_of(where), "make_block_ptr: base must be a pointer argument (ptr<T>), got {}", bt.str());
  auto op = new_op(OpKind::MakeBlockPtr, where);
  op->operands.push_back(base.id());
  for (auto [xs, role] : {std::pair{shape, "make_block_ptr: shape"}, {strides, "make_block_ptr: strides"},
                          {offsets, "make_block_ptr: offsets"}})
    for (ValueId id : int_scalars(xs, role, where))
      op->operands.push_back(id);
  llvm::SmallVector<int, 4> ord(order.begin(), order.end());
  op->results.push_back(B(where).kernel().new_value(Type::block_ptr(base.dtype(), block_shape, ord)));
  return B(where).emit(std::move(op));
}

Value advance(const Value& block_ptr, llvm::ArrayRef<Operand> deltas, CallSite where) {
  use(block_ptr, "advance", where);
  auto op = new_op(OpKind::Advance, where);
  op->operands.push_back(block_ptr.id());
  for (ValueId id : int_scalars(deltas, "advance: offsets", where))
    op->operands.push_back(id);
  return B(where).emit(std::move(op));
}

Value load(const Value& ptr, BoundaryCheck boundary_check, Padding padding, CallSite where) {
  const Type& t = use(ptr, "load", where).type();
  if (t.is_pointer()) {
    if (!boundary_check.dims.empty())
      fail_at(loc_of(where),
              "load: boundary_check applies to block pointers, got {}; a tensor of pointers takes a mask: "
              "load(ptrs, mask, other)",
              t.str());
    auto op = new_op(OpKind::Load, where);
    op->operands = {ptr.id()};
    return B(where).emit(std::move(op));
  }
  if (!t.is_block_ptr())
    fail_at(loc_of(where), "load: expected a tensor of pointers or a block pointer, got {}", t.str());
  auto op = new_op(OpKind::LoadBlock, where);
  op->operands = {ptr.id()};
  op->ints.assign(boundary_check.dims.begin(), boundary_check.dims.end());
  op->padding = padding;
  return B(where).emit(std::move(op));
}

void store(const Value& ptr, const Value& value, BoundaryCheck boundary_check, CallSite where) {
  const Type& t = use(ptr, "store", where).type();
  const Type& vt = use(value, "store", where).type();
  if (t.is_pointer()) {
    if (!boundary_check.dims.empty())
      fail_at(loc_of(where),
              "store: boundary_check applies to block pointers, got {}; a tensor of pointers takes a mask: "
              "store(ptrs, value, mask)",
              t.str());
    if (broadcast_shape(t.shape, vt.shape, "store", where, "pointers'", "value's") != t.shape)
      fail_at(loc_of(where), "store: the value shape {} is larger than the pointers' shape {}", shape_str(vt.shape),
              shape_str(t.shape));
    auto op = new_op(OpKind::Store, where);
    op->operands = {ptr.id(), broadcast_to(value, t.shape, where).id()};
    B(where).emit(std::move(op));
    return;
  }
  if (!t.is_block_ptr())
    fail_at(loc_of(where), "store: expected a tensor of pointers or a block pointer, got {}", t.str());
  Value v = vt.is_tensor() && vt.is_scalar() ? broadcast_to(value, t.shape, where) : value; // a scalar fills the block
  auto op = new_op(OpKind::StoreBlock, where);
  op->operands = {ptr.id(), v.id()};
  op->ints.assign(boundary_check.dims.begin(), boundary_check.dims.end());
  B(where).emit(std::move(op));
}

void atomic_add(const Value& block_ptr, const Value& value, BoundaryCheck boundary_check, CallSite where) {
  const Type& t = use(block_ptr, "atomic_add", where).type();
  const Type& vt = use(value, "atomic_add", where).type();
  if (!t.is_block_ptr())
    fail_at(loc_of(where),
            "atomic_add: boundary_check applies to block pointers, got {}; a tensor of pointers takes a mask: "
            "atomic_add(ptrs, value, mask)",
            t.str());
  Value v = vt.is_tensor() && vt.is_scalar() ? broadcast_to(value, t.shape, where) : value; // a scalar fills the block
  auto op = new_op(OpKind::AtomicAddBlock, where);
  op->operands = {block_ptr.id(), v.id()};
  op->ints.assign(boundary_check.dims.begin(), boundary_check.dims.end());
  B(where).emit(std::move(op));
}

} // namespace kiln
