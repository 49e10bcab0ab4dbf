// The static type of every IR value: a tensor (a scalar is a rank-0 tensor), a tensor of global
// pointers, or a block pointer. Shapes are static; tile dimensions are known when a kernel is built.
#pragma once

#include "dsl/dtype.h"

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/SmallVector.h>

#include <string>

namespace kiln {

using Shape = llvm::SmallVector<int64_t, 4>;

enum class TypeKind : uint8_t {
  Tensor,   // values of `elem`; shape {} is a scalar
  Pointer,  // global pointers to `elem`; shape {} is one pointer (a kernel argument)
  BlockPtr, // a block pointer to a `shape` block of `elem`, traversed in `order`
};

struct Type {
  TypeKind kind = TypeKind::Tensor;
  DType elem = DType::f32;
  Shape shape;                    // tensor/pointer shape, or a block pointer's block shape
  llvm::SmallVector<int, 4> order; // block pointers only: dims from fastest- to slowest-varying

  static Type scalar(DType t) { return Type{TypeKind::Tensor, t, {}, {}}; }
  static Type tensor(DType t, Shape s) { return Type{TypeKind::Tensor, t, std::move(s), {}}; }
  static Type pointer(DType pointee, Shape s = {}) { return Type{TypeKind::Pointer, pointee, std::move(s), {}}; }
  static Type block_ptr(DType pointee, Shape block, llvm::SmallVector<int, 4> order) {
    return Type{TypeKind::BlockPtr, pointee, std::move(block), std::move(order)};
  }

  bool is_tensor() const { return kind == TypeKind::Tensor; }
  bool is_pointer() const { return kind == TypeKind::Pointer; }
  bool is_block_ptr() const { return kind == TypeKind::BlockPtr; }
  bool is_scalar() const { return kind != TypeKind::BlockPtr && shape.empty(); }
  int rank() const { return static_cast<int>(shape.size()); }
  int64_t numel() const;
  Type with_shape(Shape s) const;   // same kind and element type, another shape
  Type with_elem(DType t) const;    // same kind and shape, another element type

  bool operator==(const Type& o) const {
    return kind == o.kind && elem == o.elem && shape == o.shape && order == o.order;
  }
  bool operator!=(const Type& o) const { return !(*this == o); }

  std::string str() const; // "f32", "tensor<128x64xf16>", "ptr<f16>", "tensor<64xptr<f32>>", "block_ptr<64x64xf16, order=1,0>"
};

std::string shape_str(const Shape& s); // "(128, 64)"

} // namespace kiln
