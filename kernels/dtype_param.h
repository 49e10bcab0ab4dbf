// The DTYPE compile-time parameter every shipped kernel that has one shares (matmul, softmax, the attention
// kernels): which element type the kernel's input and output tensors hold (0 f16, 1 bf16, 2 f32).
#pragma once

#include "dsl/dtype.h"

#include <cstdint>
#include <string_view>

namespace kiln {

// The element type DTYPE=`code` selects; a kiln::Error naming `kernel` for any other code.
DType dtype_from_param(int64_t code, std::string_view kernel);
// The DTYPE code of `t`; a kiln::Error naming `kernel` when `t` is not f16, bf16 or f32.
int64_t dtype_param(DType t, std::string_view kernel);

} // namespace kiln
