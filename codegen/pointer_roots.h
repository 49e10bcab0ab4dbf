// Which pointer parameters a pointer value may come from: the analysis behind "this tensor is one the kernel
// never writes" (a persistent grid's early copy of the next program's tile, a producer's second read of a
// scalar) and "the kernel also reads through this parameter" (bulk reductions, reductions left unordered).
// Internal to the code generator.
#pragma once

#include "dsl/ir.h"

#include <functional>
#include <string>
#include <optional>
#include <set>
#include <unordered_map>
#include <unordered_set>
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
  // The parameters the kernel may read through: loads, and atomic adds that are not reductions; nullopt when such
  // a read's pointer has unknown roots.
  std::optional<std::set<int>> read();
  // Why a write through pointer `v` that lands asynchronously (a bulk reduction, a TMA store) could be read back by
  // the kernel before it lands: its base has unknown roots, or comes from a parameter the kernel may also read ("":
  // neither). `lands` names the write for the message: "a TMA store lands".
  std::string why_read_back(ValueId v, const char* lands);
  // Whether `op` is a reduction: an atomic add whose old values nothing reads (through a block pointer, always).
  bool reduces(const Op& op) const;
  // Whether every parameter `v` may come from is known and one the kernel never writes.
  bool never_written(ValueId v);

private:
  // The parameters the ops `pick` selects go through; nullopt when one's pointer has unknown roots.
  std::optional<std::set<int>> through(const std::function<bool(const Op&)>& pick);
  bool collect_carried(const Op& loop, size_t i, std::set<int>& roots, std::set<ValueId>& seen);
  bool collect(ValueId v, std::set<int>& roots, std::set<ValueId>& seen);

  const Kernel& k_;
  std::unordered_map<ValueId, std::pair<const Op*, size_t>> carried_;
  std::unordered_set<ValueId> used_; // every value some op reads
  std::optional<std::optional<std::set<int>>> written_, read_; // computed once
};

} // namespace kiln
