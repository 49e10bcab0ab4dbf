#include "capi/host_rows.h"

#include <cstring>

namespace kiln::capi {

void copy_rows(const uint8_t* src, llvm::ArrayRef<int64_t> src_strides, uint8_t* dst,
               llvm::ArrayRef<int64_t> dst_strides, const RowShape& shape, int64_t elem_bytes) {
  const size_t dims = shape.outer.size();
  for (int64_t n : shape.outer)
    if (n == 0)
      return;
  const size_t row_bytes = static_cast<size_t>(shape.row * elem_bytes);
  llvm::SmallVector<int64_t, 4> index(dims, 0);
  while (true) {
    int64_t from = 0, to = 0;
    for (size_t d = 0; d < dims; ++d) {
      from += index[d] * src_strides[d];
      to += index[d] * dst_strides[d];
    }
    std::memcpy(dst + to * elem_bytes, src + from * elem_bytes, row_bytes);
    size_t d = dims;
    while (d > 0 && ++index[d - 1] == shape.outer[d - 1])
      index[--d] = 0;
    if (d == 0)
      return;
  }
}

HostBuffer gather_rows(uint64_t address, DType dtype, llvm::ArrayRef<int64_t> from,
                       llvm::ArrayRef<int64_t> to, const RowShape& shape, const char* name) {
  int64_t numel = shape.row;
  for (int64_t n : shape.outer)
    numel *= n;
  HostBuffer buf(dtype, numel, name);
  copy_rows(host_bytes(address), from, buf.bytes.data(), to, shape, dtype_bytes(dtype));
  return buf;
}

void scatter_rows(const HostBuffer& buf, llvm::ArrayRef<int64_t> from, uint64_t address,
                  llvm::ArrayRef<int64_t> to, const RowShape& shape) {
  copy_rows(buf.bytes.data(), from, host_bytes(address), to, shape, dtype_bytes(buf.dtype));
}

llvm::SmallVector<int64_t, 4> dense_row_strides(const RowShape& shape) {
  llvm::SmallVector<int64_t, 4> strides(shape.outer.size());
  int64_t step = shape.row;
  for (size_t d = shape.outer.size(); d-- > 0;) {
    strides[d] = step;
    step *= shape.outer[d];
  }
  return strides;
}

HostBuffer buffer_of(DType dtype, const std::vector<double>& values, const char* name) {
  HostBuffer buf(dtype, static_cast<int64_t>(values.size()), name);
  for (size_t i = 0; i < values.size(); ++i)
    buf.set(static_cast<int64_t>(i), values[i]);
  return buf;
}

} // namespace kiln::capi
