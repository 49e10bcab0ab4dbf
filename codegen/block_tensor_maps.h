// The tensor map a block pointer describes (codegen/tma_plan.h): a block-pointer value traced back to its one
// make_block_ptr, and the map that copies that pointer's blocks to or from a shared tile in kiln's tile
// format. plan_tma_copies (pipelined loads) and plan_tma_stores (a finished tile's stores) read block
// pointers so.
#pragma once

#include "codegen/lowering_plan.h"

#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>

namespace kiln {

// Finds the make_block_ptr a block-pointer value comes from, through advances and the values a loop carries
// (its initial value and what its body yields must lead to the same one).
class BlockPtrTracer {
public:
  explicit BlockPtrTracer(const Kernel& k);
  // The make_block_ptr behind `v`, or nullptr with `why` filled.
  const Op* trace(ValueId v, std::string& why);

private:
  bool visit(ValueId v, std::set<ValueId>& seen, const Op*& found, std::string& why);

  const Kernel& k_;
  std::unordered_map<ValueId, std::pair<const Op*, size_t>> carried_;
};

// The tensor map of `make`'s tensor in boxes of `tile` (the block, its contiguous dim cut to the tile's
// swizzle line), or nullopt with `why`: a base that is not a pointer parameter plus bounded per-program
// terms, more dims than a map holds, a shape or stride computed in the kernel.
std::optional<TensorMapParam> tensor_map_for(const Kernel& k, const Op& make, const SharedTile& tile,
                                             std::string& why);

} // namespace kiln
