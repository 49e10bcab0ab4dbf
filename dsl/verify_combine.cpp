// The verifier's rules for the combine region of associative_scan (a Scan with ReduceOp::Combine), apart from
// verifier.cpp because they check a region, not an op: what a combine may hold and return.
#include "dsl/verifier.h"

#include <unordered_set>

namespace kiln {

// The combine of associative_scan: two scalar args of the scanned dtype `t`, elementwise ops on values of the
// combine only, and a yield of one scalar of dtype `t`.
void check_combine(const Op& op, const Kernel& k) {
  const DType t = k.type(op.operands[0]).elem;
  auto error = [&](const std::string& what) { fail_at(op.loc, "associative_scan: {}", what); };
  if (op.regions.size() != 1 || op.regions[0].args.size() != 2)
    throw InternalError("associative_scan: the combine must be one region of two arguments");
  const Region& body = op.regions[0];
  for (ValueId a : body.args)
    if (k.type(a) != Type::scalar(t))
      throw InternalError(fmt::format("associative_scan: combine argument {} is not a scalar {}",
                                      k.type(a).str(), dtype_name(t)));
  if (body.ops.empty() || body.ops.back()->kind != OpKind::Yield || body.ops.back()->operands.size() != 1)
    throw InternalError("associative_scan: the combine must end in a yield of one value");
  std::unordered_set<ValueId> own(body.args.begin(), body.args.end());
  for (const auto& inner : body.ops) {
    const bool elementwise = inner->kind == OpKind::Constant || inner->kind == OpKind::Unary ||
                             inner->kind == OpKind::Binary || inner->kind == OpKind::Cast ||
                             inner->kind == OpKind::Where || inner->kind == OpKind::Fma;
    if (!elementwise && inner->kind != OpKind::Yield)
      error(fmt::format(
          "the combine may hold only elementwise ops on its scalars (arithmetic, comparisons, "
          "where, casts, fma, math functions, literals), got {} at {}; compute it outside the scan",
          op_name(inner->kind), inner->loc.str()));
    for (ValueId v : inner->operands)
      if (!own.count(v))
        error(fmt::format("the combine uses {} ({}), a value from outside it, at {}; a combine sees only its "
                          "two arguments and literals",
                          k.info(v).name.empty() ? fmt::format("%{}", v) : "'" + k.info(v).name + "'",
                          k.type(v).str(), inner->loc.str()));
    own.insert(inner->results.begin(), inner->results.end());
  }
  const Type& got = k.type(body.ops.back()->operands[0]);
  if (got != Type::scalar(t))
    error(fmt::format(
        "the combine must return one scalar of the scanned dtype {}, got {}{}", dtype_name(t), got.str(),
        got.is_tensor() && got.is_scalar() ? "; convert it with .to(" + std::string(dtype_name(t)) + ")"
                                           : ""));
}

} // namespace kiln
