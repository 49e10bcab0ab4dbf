// The address analysis behind launch plans (analysis/launch_plan.h): an abstract interpretation of a kernel
// over every program of its grid at once, which finds for each pointer parameter the range of element
// offsets from its address that the kernel may reach, and whether it reads and/or writes them. Integer
// values are tracked as intervals (analysis/interval.h) of program ids, aranges, loop induction variables,
// loop-carried offsets and scalars; masks are ignored, so a range may be larger than what a launch touches
// but never smaller. A block pointer reaches the tensor it declares: base + sum over dims of
// (shape - 1) * stride.
#pragma once

#include "analysis/interval.h"
#include "dsl/ir.h"
#include "dsl/registry.h"

#include <map>
#include <set>
#include <vector>

namespace kiln {

// What the analysis knows of one IR value: its integer range (elements of a tensor included), and for
// pointers the parameters they may point into (range = element offset from the parameter's address), and
// for block pointers the make_block_ptr ops they may come from.
struct AbstractValue {
  Interval range;
  std::set<int> roots;               // pointer parameters
  std::set<const Op*> block_sources; // MakeBlockPtr ops
};

// What one pointer parameter is used for across the kernel.
struct ParamAccess {
  Interval range; // element offsets reached (inclusive); valid when `touched`
  bool touched = false, read = false, written = false;
  const Op* unbounded = nullptr; // an access whose addresses could not be bounded
};

class AddressAnalysis {
public:
  // Analyses `k` over `grid` with the integer parameters in `ints` (by parameter index) known exactly;
  // other integer parameters are unknown.
  AddressAnalysis(const Kernel& k, const Grid& grid, const std::map<int, int64_t>& ints);

  const AbstractValue& val(ValueId v) const { return vals_.at(static_cast<size_t>(v)); }
  // By pointer parameter index; a parameter the kernel never accesses is absent.
  const std::map<int, ParamAccess>& accesses() const { return accesses_; }
  // Every make_block_ptr op of the kernel, in program order.
  const std::vector<const Op*>& block_ptr_ops() const { return block_ptr_ops_; }

private:
  AbstractValue& at(ValueId v) { return vals_.at(static_cast<size_t>(v)); }
  void run_region(const Region& r);
  void record(const AbstractValue& ptr, const Interval& range, const Op& op, bool read, bool written);
  Interval block_extent(const Op& make) const;
  void exec(const Op& op);
  void record_block_access(const Op& op, bool read, bool written);
  void exec_binary(const Op& op);
  void exec_for(const Op& op);
  void exec_if(const Op& op);

  const Kernel& k_;
  Grid grid_;
  std::vector<AbstractValue> vals_;
  std::map<int, ParamAccess> accesses_;
  std::vector<const Op*> block_ptr_ops_;
};

} // namespace kiln
