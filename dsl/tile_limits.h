// How large a tile may be: at most kMaxTileElements elements (2^20, Triton's limit on a tensor's numel), for every
// tensor, tensor of pointers and block pointer's block a kernel builds. A GPU program's tile lives in registers or
// shared memory, where a few tens of thousands of elements already fill an SM; a larger one can only be a mistake
// (a size meant for the problem given to a tile), and the interpreter would spend gigabytes and minutes on it before
// the code generator refused it. infer_result_type applies the rule to every op's result, so the builder reports
// it at the DSL call that makes such a tile.
#pragma once

#include "dsl/type.h"

#include <cstdint>
#include <string>

namespace kiln {

inline constexpr int64_t kMaxTileElements = int64_t{1} << 20;

// Why `t` is too large a tile ("" where it is not): "a tile of shape (2048, 1024) (tensor<2048x1024xf32>): 2097152
// elements, where a tile holds at most 1048576 (...); use smaller tiles and loop over the rest".
std::string why_tile_too_large(const Type& t);

} // namespace kiln
