#include "codegen/program_scalars.h"

#include "codegen/pointer_roots.h"

#include <fmt/format.h>

namespace kiln {

std::map<const Op*, size_t> top_level_positions(const Kernel& k) {
  std::map<const Op*, size_t> at;
  for (size_t i = 0; i < k.body.ops.size(); ++i)
    at[k.body.ops[i].get()] = i;
  return at;
}

std::vector<const Op*> top_level_scalar_slice(const Kernel& k, const LoweringPlan& plan,
                                              std::vector<ValueId> needed, size_t before,
                                              const std::function<bool(ValueId)>& given,
                                              const std::string& who, std::string& why) {
  const std::map<const Op*, size_t> top_level = top_level_positions(k);
  PointerRoots roots(k);
  auto read_only = [&](const Op& load) { return roots.never_written(load.operands[0]); };
  std::set<size_t> slice;
  std::set<ValueId> seen;
  while (!needed.empty()) {
    ValueId v = needed.back();
    needed.pop_back();
    if (!seen.insert(v).second)
      continue;
    const ValueInfo& info = k.info(v);
    if (info.param_index >= 0 || (given && given(v)))
      continue;
    const Op* def = info.def;
    auto at = def ? top_level.find(def) : top_level.end();
    if (at == top_level.end() || at->second >= before) {
      if (def && def->kind == OpKind::Constant)
        continue; // a constant inside later code: printed inline where it is used
      why = fmt::format("{} need %{} ({}), which is not computed at the top of the kernel before them", who,
                        v, def ? def->loc.str() : "a loop variable");
      return {};
    }
    const Placement p = plan.where(v);
    const bool pure = def->kind == OpKind::Constant || def->kind == OpKind::ProgramId ||
                      def->kind == OpKind::NumPrograms || def->kind == OpKind::Unary ||
                      def->kind == OpKind::Binary || def->kind == OpKind::Cast ||
                      def->kind == OpKind::Where || def->kind == OpKind::Fma || def->kind == OpKind::AddPtr ||
                      def->kind == OpKind::MakeBlockPtr || def->kind == OpKind::Advance ||
                      (def->kind == OpKind::Load && read_only(*def));
    if (!pure || (p != Placement::Scalar && p != Placement::BlockPtr)) {
      why = fmt::format(
          "{} need %{} from {} at {}, which cannot be computed again (only scalars of tensors the "
          "kernel never writes are read again, and no tile is held)",
          who, v, op_name(def->kind), def->loc.str());
      return {};
    }
    slice.insert(at->second);
    needed.insert(needed.end(), def->operands.begin(), def->operands.end());
  }
  std::vector<const Op*> ops;
  for (size_t i : slice)
    ops.push_back(k.body.ops[i].get());
  return ops;
}

} // namespace kiln
