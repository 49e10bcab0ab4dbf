// A user combine (the region of a Scan with ReduceOp::Combine, built by associative_scan) evaluated on two
// scalars: the interpreter's rule for it, each op by the scalar rules of dsl/scalar_eval.h, so that a combine
// computes what the same ops compute anywhere else in a kernel.
#pragma once

#include "dsl/ir.h"
#include "dsl/scalar_eval.h"

#include <unordered_map>

namespace kiln {

class CombineEval {
public:
  // `body`: the combine region of a Scan of `k` (its verifier has checked that it holds elementwise ops
  // only).
  CombineEval(const Kernel& k, const Region& body) : k_(k), body_(body) {}

  // combine(a, b), both of the combine's dtype; the result has that dtype.
  ScalarValue operator()(const ScalarValue& a, const ScalarValue& b);

private:
  const Kernel& k_;
  const Region& body_;
  std::unordered_map<ValueId, ScalarValue> env_;
};

} // namespace kiln
