#include "analysis/address_analysis.h"

#include "dsl/scalar_eval.h"

#include <algorithm>
#include <optional>

namespace kiln {

namespace {

// What either of two values may be: the hull of the ranges, the union of the sources.
AbstractValue join(const AbstractValue& a, const AbstractValue& b) {
  AbstractValue r;
  r.range = hull(a.range, b.range);
  r.roots = a.roots;
  r.roots.insert(b.roots.begin(), b.roots.end());
  r.block_sources = a.block_sources;
  r.block_sources.insert(b.block_sources.begin(), b.block_sources.end());
  return r;
}

// Whether `outer` already allows everything `inner` may be.
bool covers(const AbstractValue& outer, const AbstractValue& inner) {
  return outer.range.contains(inner.range) &&
         std::includes(outer.roots.begin(), outer.roots.end(), inner.roots.begin(), inner.roots.end()) &&
         std::includes(outer.block_sources.begin(), outer.block_sources.end(), inner.block_sources.begin(),
                       inner.block_sources.end());
}

} // namespace

AddressAnalysis::AddressAnalysis(const Kernel& k, const Grid& grid, const std::map<int, int64_t>& ints)
    : k_(k), grid_(grid), vals_(k.values.size()) {
  for (size_t i = 0; i < k.params.size(); ++i) {
    const ValueInfo& info = k.info(k.params[i].value);
    AbstractValue& v = vals_[static_cast<size_t>(k.params[i].value)];
    if (info.type.is_pointer()) {
      v.roots.insert(static_cast<int>(i));
      v.range = Interval::exact(0);
    } else if (auto it = ints.find(static_cast<int>(i)); it != ints.end()) {
      v.range = Interval::exact(it->second);
    }
  }
  run_region(k.body);
}

void AddressAnalysis::run_region(const Region& r) {
  for (const auto& op : r.ops)
    exec(*op);
}

void AddressAnalysis::record(const AbstractValue& ptr, const Interval& range, const Op& op, bool read,
                             bool written) {
  for (int root : ptr.roots) {
    ParamAccess& a = accesses_[root];
    a.read |= read;
    a.written |= written;
    if (!range.known) {
      if (!a.unbounded)
        a.unbounded = &op;
      continue;
    }
    a.range = a.touched ? hull(a.range, range) : range;
    a.touched = true;
  }
}

// The elements a block pointer made by `make` declares: base + sum (shape - 1) * stride over its dims.
Interval AddressAnalysis::block_extent(const Op& make) const {
  const int r = k_.type(make.result()).rank();
  Interval e = val(make.operands[0]).range;
  for (int d = 0; d < r && e.known; ++d) {
    const Interval shape = val(make.operands[static_cast<size_t>(1 + d)]).range;
    const Interval stride = val(make.operands[static_cast<size_t>(1 + r + d)]).range;
    if (!shape.known || !stride.known)
      return Interval::unknown();
    if (shape.hi <= 0)
      continue; // an empty dim reaches nothing beyond the base
    const Interval reach = interval_binary(BinaryOp::Mul, Interval::of(0, shape.hi - 1), stride, DType::i64);
    e = interval_binary(BinaryOp::Add, e, reach, DType::i64);
  }
  return e;
}

void AddressAnalysis::exec(const Op& op) {
  auto operand = [&](size_t i) -> const AbstractValue& { return val(op.operands[i]); };
  auto result = [&]() -> AbstractValue& { return at(op.result()); };
  auto is_int_value = [&](ValueId v) { return is_int(k_.type(v).elem) && !k_.type(v).is_pointer(); };
  switch (op.kind) {
  case OpKind::Constant:
    if (const DType t = k_.type(op.result()).elem; is_int(t))
      result().range = Interval::exact(eval_constant(op, t).i);
    return;
  case OpKind::Arange:
    result().range = Interval::of(op.arange_lo(), op.arange_hi() - 1);
    return;
  case OpKind::ProgramId:
    result().range = Interval::of(0, grid_[static_cast<size_t>(op.axis)] - 1);
    return;
  case OpKind::NumPrograms:
    result().range = Interval::exact(grid_[static_cast<size_t>(op.axis)]);
    return;
  case OpKind::Broadcast:
  case OpKind::ExpandDims:
  case OpKind::Reshape:
  case OpKind::Trans:
    result() = operand(0);
    return;
  case OpKind::Unary:
    if (is_int_value(op.operands[0]))
      result().range = interval_unary(op.unary, operand(0).range, k_.type(op.operands[0]).elem);
    return;
  case OpKind::Binary:
    return exec_binary(op);
  case OpKind::Cast: {
    const DType to = k_.type(op.result()).elem;
    // To i1 anything gives 0 or 1; to another integer only an integer has a range (a float's is unknown).
    result().range = to == DType::i1 || (is_int(to) && is_int_value(op.operands[0]))
                         ? interval_cast(operand(0).range, to)
                         : Interval::unknown();
    return;
  }
  case OpKind::Where:
    result() = join(operand(1), operand(2));
    return;
  case OpKind::Reduce: {
    if (!is_int_value(op.operands[0]))
      return;
    // A sum of n values in [lo, hi] lies in [n lo, n hi]; the total wraps only if that range does.
    const Type& xt = k_.type(op.operands[0]);
    const int64_t n = xt.shape[static_cast<size_t>(op.axis)];
    result().range = op.reduce == ReduceOp::Sum
                         ? interval_binary(BinaryOp::Mul, operand(0).range, Interval::exact(n), xt.elem)
                     : op.reduce == ReduceOp::Prod ? Interval::unknown() // powers of the bounds: not tracked
                                                   : operand(0).range;
    return;
  }
  case OpKind::Sort: // a permutation of its operand
    result() = operand(0);
    return;
  case OpKind::Scan: {
    if (!is_int_value(op.operands[0]))
      return;
    // A prefix sum of k <= n values in [lo, hi] lies in [k lo, k hi], so between the bounds for k = 1 and n.
    const Type& xt = k_.type(op.operands[0]);
    const int64_t n = xt.shape[static_cast<size_t>(op.axis)];
    result().range = op.reduce == ReduceOp::Sum
                         ? hull(operand(0).range,
                                interval_binary(BinaryOp::Mul, operand(0).range, Interval::exact(n), xt.elem))
                     : op.reduce == ReduceOp::Max || op.reduce == ReduceOp::Min
                         ? operand(0).range
                         : Interval::unknown(); // products and user combines: not tracked
    return;
  }
  case OpKind::Fma:
    return; // float data
  case OpKind::ArgMax:
    result().range = Interval::of(0, k_.type(op.operands[0]).shape[static_cast<size_t>(op.axis)] - 1);
    return;
  case OpKind::Dot:
  case OpKind::Rand:
    return; // float data
  case OpKind::LoadBlock:
    record_block_access(op, true, false);
    return;
  case OpKind::AddPtr: {
    AbstractValue r;
    r.roots = operand(0).roots;
    r.range = interval_binary(BinaryOp::Add, operand(0).range, operand(1).range, DType::i64);
    result() = r;
    return;
  }
  case OpKind::Load:
    record(operand(0), operand(0).range, op, true, false);
    return;
  case OpKind::Store:
    record(operand(0), operand(0).range, op, false, true);
    return;
  case OpKind::AtomicAdd:
    record(operand(0), operand(0).range, op, true, true);
    return;
  case OpKind::MakeBlockPtr: {
    AbstractValue r;
    r.roots = operand(0).roots;
    r.block_sources.insert(&op);
    result() = r;
    if (std::find(block_ptr_ops_.begin(), block_ptr_ops_.end(), &op) == block_ptr_ops_.end())
      block_ptr_ops_.push_back(&op);
    return;
  }
  case OpKind::Advance:
    result() = operand(0);
    return;
  case OpKind::StoreBlock:
    record_block_access(op, false, true);
    return;
  case OpKind::AtomicAddBlock:
    record_block_access(op, true, true);
    return;
  case OpKind::For:
    return exec_for(op);
  case OpKind::If:
    return exec_if(op);
  case OpKind::Yield:
    return;
  }
}

void AddressAnalysis::record_block_access(const Op& op, bool read, bool written) {
  for (const Op* make : val(op.operands[0]).block_sources)
    record(val(make->operands[0]), block_extent(*make), op, read, written);
}

void AddressAnalysis::exec_binary(const Op& op) {
  AbstractValue& out = at(op.result());
  if (is_comparison(op.binary)) {
    out.range = Interval::of(0, 1);
    return;
  }
  const Type& t = k_.type(op.operands[0]);
  if (!is_int(t.elem) || t.is_pointer())
    return;
  out.range = interval_binary(op.binary, val(op.operands[0]).range, val(op.operands[1]).range,
                              k_.type(op.result()).elem);
}

// A loop: the induction variable spans [lo, hi - 1]. A carried value the body moves by the same amount
// every trip (a pointer stepped by a loop-invariant offset) spans init + t * step over trips t; whatever
// else a body does to a carried value (that it does not leave as it was) makes the value unknown.
void AddressAnalysis::exec_for(const Op& op) {
  const Interval lo = val(op.operands[0]).range, hi = val(op.operands[1]).range,
                 step = val(op.operands[2]).range;
  const Region& body = op.regions[0];
  const Op& yield = *body.ops.back();
  const size_t carried = op.results.size();
  std::optional<int64_t> trips;
  if (lo.known && hi.known && step.known && step.lo > 0) {
    at(body.args[0]).range = Interval::of(lo.lo, std::max(lo.lo, hi.hi - 1));
    if (std::optional<int64_t> span = exact_offset_op(BinaryOp::Sub, hi.hi, lo.lo))
      trips = std::max<int64_t>(0, (*span + step.lo - 1) / step.lo);
  } else {
    at(body.args[0]) = AbstractValue{};
  }
  std::vector<AbstractValue> init(carried), after(carried);
  for (size_t n = 0; n < carried; ++n)
    init[n] = at(body.args[1 + n]) = val(op.operands[3 + n]);
  run_region(body);

  // Values after t trips of a translation by (down, up) at the low and high ends.
  auto stepped = [](const Interval& from, int64_t t, int64_t down, int64_t up) -> Interval {
    std::optional<int64_t> dl = exact_offset_op(BinaryOp::Mul, t, std::min<int64_t>(0, down));
    std::optional<int64_t> du = exact_offset_op(BinaryOp::Mul, t, std::max<int64_t>(0, up));
    std::optional<int64_t> new_lo = dl ? exact_offset_op(BinaryOp::Add, from.lo, *dl) : std::nullopt;
    std::optional<int64_t> new_hi = du ? exact_offset_op(BinaryOp::Add, from.hi, *du) : std::nullopt;
    return new_lo && new_hi ? Interval::of(*new_lo, *new_hi) : Interval::unknown();
  };
  struct Step {
    int64_t down = 0, up = 0;
  };
  std::vector<std::optional<Step>> steps(carried);
  bool all_invariant = true;
  for (size_t n = 0; n < carried; ++n) {
    const AbstractValue& y = val(yield.operands[n]);
    after[n] = init[n];
    if (covers(init[n], y))
      continue; // unchanged by the body (or already unknown)
    all_invariant = false;
    AbstractValue widened = join(init[n], y);
    widened.range = Interval::unknown();
    after[n] = widened;
    if (trips && init[n].range.known && y.range.known) {
      const Step st{y.range.lo - init[n].range.lo, y.range.hi - init[n].range.hi};
      // The body sees trips 0 .. trips - 1; the loop's result is one step further.
      widened.range = stepped(init[n].range, std::max<int64_t>(0, *trips - 1), st.down, st.up);
      after[n].range = stepped(init[n].range, *trips, st.down, st.up);
      if (widened.range.known && after[n].range.known)
        steps[n] = st;
    }
    at(body.args[1 + n]) = widened;
  }
  if (!all_invariant) {
    run_region(body);
    // The step must be the same from the widened range: a translation, not a value that grows with itself.
    bool rerun = false;
    for (size_t n = 0; n < carried; ++n) {
      if (!steps[n])
        continue;
      const AbstractValue& c = at(body.args[1 + n]);
      const AbstractValue& y = val(yield.operands[n]);
      if (!y.range.known || y.range.lo - c.range.lo != steps[n]->down ||
          y.range.hi - c.range.hi != steps[n]->up) {
        at(body.args[1 + n]).range = Interval::unknown();
        after[n].range = Interval::unknown();
        rerun = true;
      }
    }
    if (rerun)
      run_region(body); // records the accesses that are now unbounded
  }
  for (size_t n = 0; n < carried; ++n)
    at(op.results[n]) = after[n];
}

void AddressAnalysis::exec_if(const Op& op) {
  std::vector<AbstractValue> results(op.results.size());
  bool first = true;
  for (const Region& r : op.regions) {
    run_region(r);
    if (r.ops.empty() || r.ops.back()->kind != OpKind::Yield)
      continue;
    const Op& yield = *r.ops.back();
    for (size_t n = 0; n < op.results.size() && n < yield.operands.size(); ++n)
      results[n] = first ? val(yield.operands[n]) : join(results[n], val(yield.operands[n]));
    first = false;
  }
  for (size_t n = 0; n < op.results.size(); ++n)
    at(op.results[n]) = results[n];
}

} // namespace kiln
