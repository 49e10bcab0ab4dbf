// Moving a caller's strided host tensor into a kernel's dense buffer and back, a row at a time: every path of
// the C ABI that runs kiln's interpreter on the caller's memory (host_attention, host_varlen, host_decode)
// works on tensors whose last dim is contiguous (the validation requires it), so a row moves as one memcpy.
#pragma once

#include "dsl/host_buffer.h"

#include <llvm/ADT/ArrayRef.h>

#include <cstdint>
#include <vector>

namespace kiln::capi {

// The host memory at a TensorRef's address.
inline uint8_t* host_bytes(uint64_t address) { return reinterpret_cast<uint8_t*>(address); }

// The rows of a tensor: the shape of its outer dims (all but the last) and the length of a row in elements.
struct RowShape {
  llvm::SmallVector<int64_t, 4> outer;
  int64_t row = 0;
};

// Copies every row of `shape` from `src` (outer strides `src_strides`, in elements) to `dst` (`dst_strides`);
// elements of `elem_bytes` bytes.
void copy_rows(const uint8_t* src, llvm::ArrayRef<int64_t> src_strides, uint8_t* dst,
               llvm::ArrayRef<int64_t> dst_strides, const RowShape& shape, int64_t elem_bytes);

// The caller's tensor at `address` (outer strides `from`) as a new dense buffer of `dtype` whose outer
// strides are `to`; `name` names the buffer in the interpreter's errors.
HostBuffer gather_rows(uint64_t address, DType dtype, llvm::ArrayRef<int64_t> from,
                       llvm::ArrayRef<int64_t> to, const RowShape& shape, const char* name);
// The buffer `buf` (outer strides `from`) written into the caller's tensor at `address` (outer strides `to`).
void scatter_rows(const HostBuffer& buf, llvm::ArrayRef<int64_t> from, uint64_t address,
                  llvm::ArrayRef<int64_t> to, const RowShape& shape);

// `values` (an interpreted run's results, in the kernel's dtype already) as a dense buffer of `dtype`.
HostBuffer buffer_of(DType dtype, const std::vector<double>& values, const char* name);

// The dense row-major outer strides of `shape`.
llvm::SmallVector<int64_t, 4> dense_row_strides(const RowShape& shape);

} // namespace kiln::capi
