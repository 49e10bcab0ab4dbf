// Launch plans: scalar values (given or derived as dense block-pointer strides) and the element ranges each
// pointer parameter reaches, from an interval analysis of the kernel's IR over its grid.
#include "kernels/launch_plan.h"

#include "dsl/scalar_eval.h"
#include "support/error.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <random>
#include <set>

namespace kiln {

namespace {

// A closed integer interval [lo, hi], or unknown (any value).
struct Interval {
  int64_t lo = 0, hi = 0;
  bool known = false;

  static Interval unknown() { return {}; }
  static Interval exact(int64_t v) { return {v, v, true}; }
  static Interval of(int64_t lo, int64_t hi) { return {std::min(lo, hi), std::max(lo, hi), true}; }
  bool is_exact() const { return known && lo == hi; }
  // Unknown holds every value, so it contains everything.
  bool contains(const Interval& o) const { return !known || (o.known && lo <= o.lo && o.hi <= hi); }
};

Interval hull(const Interval& a, const Interval& b) {
  if (!a.known || !b.known)
    return Interval::unknown();
  return Interval::of(std::min(a.lo, b.lo), std::max(a.hi, b.hi));
}

// x op y on integers of dtype `t` by the interpreter's rules (dsl/scalar_eval.h), or nullopt where they wrap
// the result: past a wrapped endpoint the values in between are no longer an interval.
std::optional<int64_t> exact(BinaryOp op, int64_t x, int64_t y, DType t) {
  const IntResult r = int_binary(op, x, y, t);
  return r.wrapped ? std::nullopt : std::optional<int64_t>(r.value);
}
// Offsets from a pointer parameter's address are i64, as the interpreter's element offsets are.
std::optional<int64_t> exact_offset(BinaryOp op, int64_t x, int64_t y) { return exact(op, x, y, DType::i64); }

// a op b for every corner of the two intervals, for an op monotone in each operand on them (+, -, *, and /
// by a divisor of one sign); unknown when any corner wraps in the dtype `t`.
Interval corners(const Interval& a, const Interval& b, BinaryOp op, DType t) {
  if (!a.known || !b.known)
    return Interval::unknown();
  int64_t lo = 0, hi = 0;
  bool first = true;
  for (int64_t x : {a.lo, a.hi})
    for (int64_t y : {b.lo, b.hi}) {
      std::optional<int64_t> v = exact(op, x, y, t);
      if (!v)
        return Interval::unknown();
      lo = first ? *v : std::min(lo, *v);
      hi = first ? *v : std::max(hi, *v);
      first = false;
    }
  return Interval::of(lo, hi);
}

// Element offsets from a pointer parameter's address added up (i64, like every offset).
Interval add_offsets(const Interval& a, const Interval& b) {
  return corners(a, b, BinaryOp::Add, DType::i64);
}

// C division (truncating); unknown when the divisor's interval holds 0.
Interval divide(const Interval& a, const Interval& b, DType t) {
  if (!b.known || (b.lo <= 0 && b.hi >= 0))
    return Interval::unknown();
  return corners(a, b, BinaryOp::Div, t);
}

// -x, |x| and !x over an interval, from the rule at its endpoints; unknown when an endpoint wraps.
Interval unary(const Interval& x, UnaryOp op, DType t) {
  if (op == UnaryOp::Not)
    return Interval::of(0, 1);
  if (!x.known || (op != UnaryOp::Neg && op != UnaryOp::Abs))
    return Interval::unknown();
  const IntResult at_lo = int_unary(op, x.lo, t), at_hi = int_unary(op, x.hi, t);
  if (at_lo.wrapped || at_hi.wrapped)
    return Interval::unknown();
  if (op == UnaryOp::Abs && x.lo < 0 && x.hi > 0) // spans 0, where |x| is least
    return Interval::of(0, std::max(at_lo.value, at_hi.value));
  return Interval::of(at_lo.value, at_hi.value);
}

// Min and max are monotone in both operands: evaluated at the low ends and at the high ends.
Interval min_max(const Interval& a, const Interval& b, BinaryOp op, DType t) {
  if (!a.known || !b.known)
    return Interval::unknown();
  return Interval::of(int_binary(op, a.lo, b.lo, t).value, int_binary(op, a.hi, b.hi, t).value);
}

// C remainder (the sign of the dividend, smaller than the divisor); unknown when the divisor's interval
// holds 0.
Interval remainder(const Interval& a, const Interval& b) {
  if (!a.known || !b.known || (b.lo <= 0 && b.hi >= 0) || b.lo == INT64_MIN)
    return Interval::unknown();
  const int64_t m = std::max(std::abs(b.lo), std::abs(b.hi)) - 1; // |a % b| <= |b| - 1, sign of a
  if (a.lo >= 0)
    return Interval::of(0, std::min(a.hi, m));
  if (a.hi <= 0)
    return Interval::of(std::max(a.lo, -m), 0);
  return Interval::of(std::max(a.lo, -m), std::min(a.hi, m));
}

// What the analysis knows of one IR value: its integer range (elements of a tensor included), and for
// pointers the parameters they may point into (range = element offset from the parameter's address), and
// for block pointers the make_block_ptr ops they may come from.
struct AbstractValue {
  Interval range;
  std::set<int> roots;               // pointer parameters
  std::set<const Op*> block_sources; // MakeBlockPtr ops
};

AbstractValue join(const AbstractValue& a, const AbstractValue& b) {
  AbstractValue r;
  r.range = hull(a.range, b.range);
  r.roots = a.roots;
  r.roots.insert(b.roots.begin(), b.roots.end());
  r.block_sources = a.block_sources;
  r.block_sources.insert(b.block_sources.begin(), b.block_sources.end());
  return r;
}

bool covers(const AbstractValue& outer, const AbstractValue& inner) {
  return outer.range.contains(inner.range) &&
         std::includes(outer.roots.begin(), outer.roots.end(), inner.roots.begin(), inner.roots.end()) &&
         std::includes(outer.block_sources.begin(), outer.block_sources.end(), inner.block_sources.begin(),
                       inner.block_sources.end());
}

// What one pointer parameter is used for across the kernel.
struct ParamAccess {
  Interval range; // element offsets reached (inclusive); valid when `touched`
  bool touched = false, read = false, written = false;
  const Op* unbounded = nullptr; // an access whose addresses could not be bounded
};

// Abstract interpretation of a kernel over every program of its grid at once.
class AddressAnalysis {
public:
  AddressAnalysis(const Kernel& k, const Grid& grid, const std::map<int, int64_t>& ints)
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

  const AbstractValue& val(ValueId v) const { return vals_.at(static_cast<size_t>(v)); }
  const std::map<int, ParamAccess>& accesses() const { return accesses_; }
  const std::vector<const Op*>& block_ptr_ops() const { return block_ptr_ops_; }

private:
  AbstractValue& at(ValueId v) { return vals_.at(static_cast<size_t>(v)); }

  void run_region(const Region& r) {
    for (const auto& op : r.ops)
      exec(*op);
  }

  void record(const AbstractValue& ptr, const Interval& range, const Op& op, bool read, bool written) {
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
  Interval block_extent(const Op& make) const {
    const int r = k_.type(make.result()).rank();
    Interval e = val(make.operands[0]).range;
    for (int d = 0; d < r && e.known; ++d) {
      const Interval shape = val(make.operands[static_cast<size_t>(1 + d)]).range;
      const Interval stride = val(make.operands[static_cast<size_t>(1 + r + d)]).range;
      if (!shape.known || !stride.known)
        return Interval::unknown();
      if (shape.hi <= 0)
        continue; // an empty dim reaches nothing beyond the base
      e = add_offsets(e, corners(Interval::of(0, shape.hi - 1), stride, BinaryOp::Mul, DType::i64));
    }
    return e;
  }

  void exec(const Op& op) {
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
        result().range = unary(operand(0).range, op.unary, k_.type(op.operands[0]).elem);
      return;
    case OpKind::Binary:
      return exec_binary(op);
    case OpKind::Cast: {
      const DType to = k_.type(op.result()).elem;
      const Interval x = operand(0).range;
      if (to == DType::i1) {
        result().range = Interval::of(0, 1);
      } else if (is_int(to) && is_int_value(op.operands[0]) && x.known) {
        const IntResult lo = cast_int(x.lo, to), hi = cast_int(x.hi, to);
        result().range = lo.wrapped || hi.wrapped ? Interval::unknown() : Interval::of(lo.value, hi.value);
      } else {
        result().range = Interval::unknown(); // from a float
      }
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
                           ? corners(operand(0).range, Interval::exact(n), BinaryOp::Mul, xt.elem)
                           : operand(0).range;
      return;
    }
    case OpKind::ArgMax:
      result().range = Interval::of(0, k_.type(op.operands[0]).shape[static_cast<size_t>(op.axis)] - 1);
      return;
    case OpKind::Dot:
      return; // float data
    case OpKind::LoadBlock:
      record_block_access(op, true, false);
      return;
    case OpKind::AddPtr: {
      AbstractValue r;
      r.roots = operand(0).roots;
      r.range = add_offsets(operand(0).range, operand(1).range);
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
    case OpKind::For:
      return exec_for(op);
    case OpKind::If:
      return exec_if(op);
    case OpKind::Yield:
      return;
    }
  }

  void record_block_access(const Op& op, bool read, bool written) {
    for (const Op* make : val(op.operands[0]).block_sources)
      record(val(make->operands[0]), block_extent(*make), op, read, written);
  }

  void exec_binary(const Op& op) {
    AbstractValue& out = at(op.result());
    if (is_comparison(op.binary)) {
      out.range = Interval::of(0, 1);
      return;
    }
    const Type& t = k_.type(op.operands[0]);
    if (!is_int(t.elem) || t.is_pointer())
      return;
    const Interval a = val(op.operands[0]).range, b = val(op.operands[1]).range;
    const DType rt = k_.type(op.result()).elem;
    out.range = Interval::unknown();
    switch (op.binary) {
    case BinaryOp::Add:
    case BinaryOp::Sub:
    case BinaryOp::Mul:
      out.range = corners(a, b, op.binary, rt);
      break;
    case BinaryOp::Div:
      out.range = divide(a, b, rt);
      break;
    case BinaryOp::Rem:
      out.range = remainder(a, b);
      break;
    case BinaryOp::Min:
    case BinaryOp::Max:
      out.range = min_max(a, b, op.binary, rt);
      break;
    case BinaryOp::And:
    case BinaryOp::Or:
      // Non-negative operands: a & b <= min(a, b), a | b <= a + b.
      if (a.known && b.known && a.lo >= 0 && b.lo >= 0)
        out.range = op.binary == BinaryOp::And ? Interval::of(0, std::min(a.hi, b.hi))
                                               : corners(a, b, BinaryOp::Add, rt);
      break;
    default:
      break;
    }
  }

  // A loop: the induction variable spans [lo, hi - 1]. A carried value the body moves by the same amount
  // every trip (a pointer stepped by a loop-invariant offset) spans init + t * step over trips t; whatever
  // else a body does to a carried value (that it does not leave as it was) makes the value unknown.
  void exec_for(const Op& op) {
    const Interval lo = val(op.operands[0]).range, hi = val(op.operands[1]).range,
                   step = val(op.operands[2]).range;
    const Region& body = op.regions[0];
    const Op& yield = *body.ops.back();
    const size_t carried = op.results.size();
    std::optional<int64_t> trips;
    if (lo.known && hi.known && step.known && step.lo > 0) {
      at(body.args[0]).range = Interval::of(lo.lo, std::max(lo.lo, hi.hi - 1));
      if (std::optional<int64_t> span = exact_offset(BinaryOp::Sub, hi.hi, lo.lo))
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
      std::optional<int64_t> dl = exact_offset(BinaryOp::Mul, t, std::min<int64_t>(0, down));
      std::optional<int64_t> du = exact_offset(BinaryOp::Mul, t, std::max<int64_t>(0, up));
      std::optional<int64_t> new_lo = dl ? exact_offset(BinaryOp::Add, from.lo, *dl) : std::nullopt;
      std::optional<int64_t> new_hi = du ? exact_offset(BinaryOp::Add, from.hi, *du) : std::nullopt;
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

  void exec_if(const Op& op) {
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

  const Kernel& k_;
  Grid grid_;
  std::vector<AbstractValue> vals_;
  std::map<int, ParamAccess> accesses_;
  std::vector<const Op*> block_ptr_ops_;
};

bool is_int_param(const Kernel& k, size_t i) {
  const Type& t = k.info(k.params[i].value).type;
  return !t.is_pointer() && is_int(t.elem);
}

std::string name_of(const Kernel& k, ValueId v) {
  const ValueInfo& info = k.info(v);
  if (info.param_index >= 0)
    return k.params[static_cast<size_t>(info.param_index)].name;
  return info.name.empty() ? "?" : info.name;
}

// Derives, from every block pointer whose stride operand is an integer parameter without a value, the
// stride of a dense tensor of the pointer's shape in its order. Returns whether anything was derived.
bool derive_block_strides(const Kernel& k, const AddressAnalysis& a, std::map<int, int64_t>& ints,
                          std::map<int, std::string>& origins) {
  bool derived = false;
  for (const Op* make : a.block_ptr_ops()) {
    const Type& t = k.type(make->result());
    const int r = t.rank();
    int64_t dense = 1; // the stride the next dim in order has in a dense tensor
    std::string shape_text;
    for (int d = 0; d < r; ++d) {
      const ValueId s = make->operands[static_cast<size_t>(1 + d)];
      const Interval v = a.val(s).range;
      shape_text +=
          fmt::format("{}{}={}", d ? ", " : "", name_of(k, s), v.is_exact() ? std::to_string(v.lo) : "?");
    }
    for (size_t j = 0; j < t.order.size(); ++j) {
      const int d = t.order[j];
      const ValueId stride = make->operands[static_cast<size_t>(1 + r + d)];
      const int p = k.info(stride).param_index;
      if (p >= 0 && is_int_param(k, static_cast<size_t>(p)) && !ints.count(p)) {
        ints[p] = dense;
        origins[p] = fmt::format("the dense stride of dim {} of the ({}) block pointer over '{}', order ({})",
                                 d, shape_text, name_of(k, make->operands[0]), fmt::join(t.order, ", "));
        derived = true;
      }
      const Interval extent = a.val(make->operands[static_cast<size_t>(1 + d)]).range;
      std::optional<int64_t> next = extent.is_exact()
                                        ? exact_offset(BinaryOp::Mul, dense, std::max<int64_t>(extent.lo, 1))
                                        : std::nullopt;
      if (!next)
        break; // later dims' dense strides are unknown until this extent is
      dense = *next;
    }
  }
  return derived;
}

} // namespace

const PlannedArg& LaunchPlan::arg(const std::string& name) const {
  for (const PlannedArg& a : args)
    if (a.name == name)
      return a;
  throw InternalError("launch plan of '" + kernel + "' has no argument '" + name + "'");
}

int64_t LaunchPlan::bytes_read() const {
  int64_t n = 0;
  for (const PlannedArg& a : args)
    if (a.is_buffer() && a.read)
      n += a.bytes();
  return n;
}

int64_t LaunchPlan::bytes_written() const {
  int64_t n = 0;
  for (const PlannedArg& a : args)
    if (a.is_buffer() && a.written)
      n += a.bytes();
  return n;
}

LaunchPlan plan_launch(const Kernel& k, const Grid& grid, const ArgValues& given) {
  std::vector<std::string> scalar_names;
  for (const Param& p : k.params)
    if (!k.info(p.value).type.is_pointer())
      scalar_names.push_back(p.name);
  std::map<int, int64_t> ints;
  std::map<int, std::string> origins;
  for (const auto& [name, value] : given) {
    auto it = std::find_if(k.params.begin(), k.params.end(), [&](const Param& p) { return p.name == name; });
    if (it == k.params.end() || k.info(it->value).type.is_pointer())
      fail("kernel '{}' has no scalar argument '{}'; its scalar arguments are: {}", k.name, name,
           fmt::join(scalar_names, ", "));
    const int index = static_cast<int>(it - k.params.begin());
    if (is_int_param(k, static_cast<size_t>(index))) {
      const DType t = k.info(it->value).type.elem;
      if (!int_dtype_holds(t, value))
        fail("kernel '{}': argument '{}' is {}, which takes integers in [{}, {}]; got {}", k.name, name,
             dtype_name(t), int_range(t).first, int_range(t).second, value);
      ints[index] = static_cast<int64_t>(value);
      origins[index] = "given";
    }
  }
  for (const int64_t g : grid)
    if (g < 0)
      fail("kernel '{}': grid ({}, {}, {}) has a negative dimension", k.name, grid[0], grid[1], grid[2]);

  // Strides of block pointers can be derived once the shapes they depend on are known, which may itself take
  // a derived stride (never in practice more than a couple of rounds).
  for (size_t round = 0; round <= k.params.size(); ++round) {
    AddressAnalysis a(k, grid, ints);
    if (!derive_block_strides(k, a, ints, origins))
      break;
  }
  std::vector<std::string> missing;
  for (size_t i = 0; i < k.params.size(); ++i)
    if (is_int_param(k, i) && !ints.count(static_cast<int>(i)))
      missing.push_back(k.params[i].name);
  if (!missing.empty())
    fail("kernel '{}' needs a value for its integer argument{} {}: only sizes and strides of block pointers "
         "(as a dense tensor in the pointer's order) are found without one; give {} as NAME=VALUE",
         k.name, missing.size() > 1 ? "s" : "", fmt::join(missing, ", "), missing.size() > 1 ? "them" : "it");

  const AddressAnalysis a(k, grid, ints);
  LaunchPlan plan;
  plan.kernel = k.name;
  for (size_t i = 0; i < k.params.size(); ++i) {
    const Param& p = k.params[i];
    const Type& t = k.info(p.value).type;
    PlannedArg arg;
    arg.name = p.name;
    arg.dtype = t.elem;
    if (t.is_pointer()) {
      arg.kind = PlannedArg::Kind::Buffer;
      auto it = a.accesses().find(static_cast<int>(i));
      if (it != a.accesses().end()) {
        const ParamAccess& acc = it->second;
        if (acc.unbounded)
          fail_at(
              acc.unbounded->loc,
              "kernel '{}': cannot bound the elements of '{}' that this {} reaches: its addresses depend on "
              "loaded data, a float, or a value that changes without a bounded step; run it from a host "
              "harness that knows its buffers' sizes",
              k.name, p.name, op_name(acc.unbounded->kind));
        arg.read = acc.read;
        arg.written = acc.written;
        if (acc.touched) {
          arg.lo = std::min<int64_t>(0, acc.range.lo);
          arg.hi = std::max<int64_t>(1, acc.range.hi + 1);
        }
      }
    } else if (is_int(t.elem)) {
      arg.kind = PlannedArg::Kind::Int;
      arg.value = static_cast<double>(ints.at(static_cast<int>(i)));
      arg.origin = origins.at(static_cast<int>(i));
    } else {
      arg.kind = PlannedArg::Kind::Float;
      auto it = given.find(p.name);
      arg.value = it != given.end() ? it->second : 1.0;
      arg.origin = it != given.end() ? "given" : "default";
    }
    plan.args.push_back(std::move(arg));
  }
  return plan;
}

LaunchPlan merge_plans(const std::vector<LaunchPlan>& plans) {
  KILN_INTERNAL_CHECK(!plans.empty(), "merge_plans needs at least one plan");
  LaunchPlan merged = plans.front();
  for (const LaunchPlan& p : plans) {
    KILN_INTERNAL_CHECK(p.args.size() == merged.args.size(), "plans of '{}' disagree on the argument count",
                        merged.kernel);
    for (size_t i = 0; i < p.args.size(); ++i) {
      PlannedArg& m = merged.args[i];
      const PlannedArg& a = p.args[i];
      KILN_INTERNAL_CHECK(a.name == m.name && a.kind == m.kind, "plans of '{}' disagree on argument {}",
                          merged.kernel, i);
      if (m.is_buffer()) {
        m.lo = std::min(m.lo, a.lo);
        m.hi = std::max(m.hi, a.hi);
        m.read |= a.read;
        m.written |= a.written;
      } else {
        KILN_INTERNAL_CHECK(m.value == a.value, "plans of '{}' give '{}' the values {} and {}", merged.kernel,
                            m.name, m.value, a.value);
      }
    }
  }
  return merged;
}

HostBuffer random_buffer(const PlannedArg& a, uint64_t seed) {
  KILN_INTERNAL_CHECK(a.is_buffer(), "'{}' is not a buffer argument", a.name);
  HostBuffer b(a.dtype, a.elements(), a.name);
  std::mt19937_64 rng(seed);
  if (is_float(a.dtype)) {
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    for (int64_t i = 0; i < b.numel(); ++i)
      b.set(i, u(rng));
  } else {
    std::uniform_int_distribution<int64_t> u(0, a.dtype == DType::i1 ? 1 : 15);
    for (int64_t i = 0; i < b.numel(); ++i)
      b.set_int(i, u(rng));
  }
  return b;
}

} // namespace kiln
