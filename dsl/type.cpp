#include "dsl/type.h"

#include <fmt/format.h>

namespace kiln {

int64_t Type::numel() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

Type Type::with_shape(Shape s) const {
  Type t = *this;
  t.shape = std::move(s);
  return t;
}

Type Type::with_elem(DType e) const {
  Type t = *this;
  t.elem = e;
  return t;
}

static std::string dims(const Shape& s) {
  std::string out;
  for (int64_t d : s)
    out += fmt::format("{}x", d);
  return out;
}

std::string Type::str() const {
  std::string e(dtype_name(elem));
  switch (kind) {
  case TypeKind::Tensor: return shape.empty() ? e : fmt::format("tensor<{}{}>", dims(shape), e);
  case TypeKind::Pointer:
    return shape.empty() ? fmt::format("ptr<{}>", e) : fmt::format("tensor<{}ptr<{}>>", dims(shape), e);
  case TypeKind::BlockPtr: return fmt::format("block_ptr<{}{}, order={}>", dims(shape), e, fmt::join(order, ","));
  }
  return "?";
}

std::string shape_str(const Shape& s) {
  if (s.empty())
    return "()";
  if (s.size() == 1)
    return fmt::format("({},)", s[0]);
  return fmt::format("({})", fmt::join(s, ", "));
}

} // namespace kiln
