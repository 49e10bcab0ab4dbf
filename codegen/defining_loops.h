// Which loop defines each value, for the passes that move work out of loops in which it does not change
// (plan_layout_conversions' hoisted conversions, plan_register_operands' operands read before a loop).
#pragma once

#include "dsl/ir.h"

#include <cstddef>
#include <unordered_map>
#include <vector>

namespace kiln {

class DefiningLoops {
public:
  explicit DefiningLoops(const Region& body) { note(body, nullptr); }

  // Of `open`, the loops around a use outermost first, the index of the outermost one that does not define `v`
  // (so that `v` is the same in each of its iterations): 0 when `v` is defined outside every loop; open.size() when
  // there is none (the innermost open loop defines `v`, or `v` is defined in a loop that is not open).
  template <typename Loops, typename LoopOf>
  size_t first_invariant(const Loops& open, LoopOf loop_of, ValueId v) const {
    auto d = loop_.find(v);
    if (d == loop_.end())
      return 0;
    for (size_t i = 0; i < open.size(); ++i)
      if (loop_of(open[i]) == d->second)
        return i + 1;
    return open.size();
  }

private:
  std::unordered_map<ValueId, const Op*> loop_; // the innermost for op whose body defines each value (args too)

  void note(const Region& r, const Op* loop);
};

} // namespace kiln
