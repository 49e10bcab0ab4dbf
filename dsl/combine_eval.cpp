#include "dsl/combine_eval.h"

namespace kiln {

ScalarValue CombineEval::operator()(const ScalarValue& a, const ScalarValue& b) {
  env_[body_.args[0]] = a;
  env_[body_.args[1]] = b;
  auto in = [&](const Op& op, int i) -> const ScalarValue& { return env_.at(op.operands[i]); };
  for (const auto& owned : body_.ops) {
    const Op& op = *owned;
    const DType t = op.results.empty() ? DType::i32 : k_.type(op.result()).elem;
    switch (op.kind) {
    case OpKind::Yield:
      return in(op, 0);
    case OpKind::Constant:
      env_[op.result()] = eval_constant(op, t);
      break;
    case OpKind::Unary:
      env_[op.result()] = eval_unary(op.unary, in(op, 0));
      break;
    case OpKind::Binary:
      env_[op.result()] = eval_binary(op.binary, in(op, 0), in(op, 1));
      break;
    case OpKind::Cast:
      env_[op.result()] = eval_cast(in(op, 0), t);
      break;
    case OpKind::Where:
      env_[op.result()] = eval_where(in(op, 0), in(op, 1), in(op, 2));
      break;
    case OpKind::Fma:
      env_[op.result()] = ScalarValue{t, 0, fma_element(in(op, 0).f, in(op, 1).f, in(op, 2).f, t)};
      break;
    default:
      throw InternalError(fmt::format("combine: {} at {} is not elementwise (the verifier admits none)",
                                      op_name(op.kind), op.loc.str()));
    }
  }
  throw InternalError("combine: the region ends without a yield");
}

} // namespace kiln
