// Which pointer parameters a pointer value may come from: the analysis behind "this tensor is one the kernel
// never writes" (a persistent grid's early copy of the next program's tile, a producer's second read of a
// scalar) and "the kernel also loads through this parameter" (bulk reductions). Internal to the code generator.
#pragma once

#include "dsl/ir.h"

#include <optional>
#include <set>
#include <unordered_map>
#include <utility>

namespace kiln {

// The pointer parameters a pointer value (a tensor of pointers or a block pointer) may derive from, through
// pointer arithmetic, block pointers, selections and the values loops and ifs carry; nullopt when it may come
// from elsewhere (a pointer loaded from memory).
class PointerRoots {
public:
  explicit PointerRoots(const Kernel& k);

  std::optional<std::set<int>> of(ValueId v);
  // The parameters the kernel may write through (stores and atomics anywhere in it); nullopt when a write's
  // pointer has unknown roots.
  std::optional<std::set<int>> written();
  // Whether every parameter `v` may come from is known and one the kernel never writes.
  bool never_written(ValueId v);

private:
  bool collect_carried(const Op& loop, size_t i, std::set<int>& roots, std::set<ValueId>& seen);
  bool collect(ValueId v, std::set<int>& roots, std::set<ValueId>& seen);

  const Kernel& k_;
  std::unordered_map<ValueId, std::pair<const Op*, size_t>> carried_;
  std::optional<std::optional<std::set<int>>> written_; // computed once
};

} // namespace kiln
