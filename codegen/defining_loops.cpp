#include "codegen/defining_loops.h"

namespace kiln {

void DefiningLoops::note(const Region& r, const Op* loop) {
  for (ValueId a : r.args)
    if (loop)
      loop_[a] = loop;
  for (const auto& op : r.ops) {
    for (ValueId v : op->results)
      if (loop)
        loop_[v] = loop;
    for (const Region& sub : op->regions)
      note(sub, op->kind == OpKind::For ? op.get() : loop);
  }
}

} // namespace kiln
