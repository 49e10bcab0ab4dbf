#include "analysis/perf_model.h"

#include "dsl/scalar_eval.h"
#include "support/error.h"

#include <algorithm>
#include <optional>
#include <vector>

namespace kiln {

Cost& Cost::operator+=(const Cost& o) {
  matrix_flops += o.matrix_flops;
  vector_flops += o.vector_flops;
  bytes_loaded += o.bytes_loaded;
  bytes_stored += o.bytes_stored;
  return *this;
}

Cost CostEstimate::per_program() const {
  Cost c = total;
  double n = programs > 0 ? static_cast<double>(programs) : 1.0;
  c.matrix_flops /= n;
  c.vector_flops /= n;
  c.bytes_loaded /= n;
  c.bytes_stored /= n;
  return c;
}

double CostEstimate::intensity() const { return total.bytes() > 0 ? total.matrix_flops / total.bytes() : 0; }

Roofline roofline(const CostEstimate& e, double peak_tflops, double peak_gbps) {
  if (!(peak_tflops > 0) || !(peak_gbps > 0))
    fail("roofline: peaks must be positive, got {} TFLOP/s and {} GB/s", peak_tflops, peak_gbps);
  Roofline r;
  r.peak_flops_per_s = peak_tflops * 1e12;
  r.peak_bytes_per_s = peak_gbps * 1e9;
  r.compute_s = e.total.matrix_flops / r.peak_flops_per_s;
  r.memory_s = e.total.bytes() / r.peak_bytes_per_s;
  return r;
}

namespace {

// A scalar whose value the model knows (program ids, given arguments and what follows from them, evaluated
// with the interpreter's rules) or nullopt (pointers, tensor-derived values, arguments not given).
using Scalar = std::optional<ScalarValue>;

struct BlockPtrState {
  llvm::SmallVector<Scalar, 4> shape, offsets;
};

// Walks one program's ops, evaluating scalars and adding up the cost of tensor ops.
class ProgramWalker {
public:
  ProgramWalker(const Kernel& k, const Grid& grid, const ScalarArgs& args) : k_(k), grid_(grid) {
    scalars_.resize(k.values.size());
    for (const Param& p : k.params) {
      const Type& t = k.type(p.value);
      auto it = args.find(p.name);
      if (t.is_tensor() && t.is_scalar() && it != args.end())
        scalars_[static_cast<size_t>(p.value)] = ScalarValue::of_double(it->second, t.elem);
    }
  }

  int64_t visits() const { return visits_; } // ops visited by the last run

  Cost run(const std::array<int64_t, 3>& pid) {
    pid_ = pid;
    visits_ = 0;
    cost_ = Cost{};
    walk_region(k_.body);
    return cost_;
  }

private:
  Scalar& s(ValueId v) { return scalars_[static_cast<size_t>(v)]; }
  bool scalar_typed(ValueId v) const {
    const Type& t = k_.type(v);
    return t.is_tensor() && t.is_scalar();
  }
  static double dbytes(DType t) { return static_cast<double>(dtype_bytes(t)); }

  int64_t need_int(ValueId v, const Op& op, const char* what) {
    const Scalar& x = s(v);
    if (!x)
      fail_at(op.loc,
              "performance model: the {} of this {} depends on a value the model cannot evaluate ({}); give "
              "every "
              "scalar argument it depends on with --shape",
              what, op_name(op.kind),
              k_.info(v).name.empty() ? "a tensor or pointer value" : k_.info(v).name);
    return x->i;
  }

  // Whether scalar v is computed from a reduction of a tensor (data the model does not have), through
  // elementwise scalar ops.
  bool reduces_tensor_data(ValueId v) const {
    const Op* def = k_.info(v).def;
    if (def == nullptr)
      return false;
    if (def->kind == OpKind::Reduce)
      return true;
    for (ValueId operand : def->operands)
      if (scalar_typed(operand) && reduces_tensor_data(operand))
        return true;
    return false;
  }

  void walk_region(const Region& r) {
    for (const auto& op : r.ops)
      visit(*op);
  }

  // `op` on two known scalars; unknown when an operand is, or when it divides an integer by zero (an Error in
  // the interpreter; the model only estimates, and only a loop bound or branch that needs the value fails).
  static Scalar binary(BinaryOp op, const Scalar& a, const Scalar& b) {
    if (!a || !b || (is_int(a->dtype) && divides_by_zero(op, b->i)))
      return std::nullopt;
    return eval_binary(op, *a, *b);
  }

  // Elements of a block pointer's tile that lie inside the tensor along the boundary-checked dims.
  double block_elements(ValueId bp, llvm::ArrayRef<int64_t> checked) {
    const Type& t = k_.type(bp);
    auto it = blocks_.find(bp);
    double n = 1;
    for (int d = 0; d < t.rank(); ++d) {
      double extent = static_cast<double>(t.shape[static_cast<size_t>(d)]);
      bool is_checked = std::find(checked.begin(), checked.end(), d) != checked.end();
      if (is_checked && it != blocks_.end()) {
        const Scalar& shape = it->second.shape[static_cast<size_t>(d)];
        const Scalar& off = it->second.offsets[static_cast<size_t>(d)];
        if (shape && off)
          extent = std::clamp(shape->as_double() - off->as_double(), 0.0, extent);
      }
      n *= extent;
    }
    return n;
  }

  void visit(const Op& op) {
    ++visits_;
    const ValueId res = op.result();
    switch (op.kind) {
    case OpKind::Constant:
      if (scalar_typed(res))
        s(res) = eval_constant(op, k_.type(res).elem);
      return;
    case OpKind::ProgramId:
      s(res) = ScalarValue::of_int(pid_[static_cast<size_t>(op.axis)], k_.type(res).elem);
      return;
    case OpKind::NumPrograms:
      s(res) = ScalarValue::of_int(grid_[static_cast<size_t>(op.axis)], k_.type(res).elem);
      return;
    case OpKind::Unary: {
      const Type& t = k_.type(res);
      if (is_float(t.elem))
        cost_.vector_flops += static_cast<double>(std::max<int64_t>(1, t.numel()));
      if (t.is_scalar())
        s(res) = s(op.operands[0]) ? eval_unary(op.unary, *s(op.operands[0])) : Scalar{};
      return;
    }
    case OpKind::Binary: {
      const Type& t = k_.type(res);
      const DType operand_t = k_.type(op.operands[0]).elem;
      if (is_float(operand_t))
        cost_.vector_flops += static_cast<double>(std::max<int64_t>(1, t.numel()));
      if (t.is_tensor() && t.is_scalar())
        s(res) = binary(op.binary, s(op.operands[0]), s(op.operands[1]));
      return;
    }
    case OpKind::Cast:
      if (scalar_typed(res))
        s(res) = s(op.operands[0]) ? eval_cast(*s(op.operands[0]), k_.type(res).elem) : Scalar{};
      return;
    case OpKind::Rand: // one f32 result an element (the generator's integer rounds are not counted)
      cost_.vector_flops += static_cast<double>(std::max<int64_t>(1, k_.type(res).numel()));
      return;
    case OpKind::Where:
      if (scalar_typed(res)) {
        const Scalar c = s(op.operands[0]);
        s(res) = c ? s(op.operands[c->is_true() ? 1 : 2]) : Scalar{};
      }
      return;
    case OpKind::Dot: {
      const Type& a = k_.type(op.operands[0]);
      const Type& b = k_.type(op.operands[1]);
      cost_.matrix_flops += 2.0 * static_cast<double>(a.shape[0]) * static_cast<double>(b.shape[1]) *
                            static_cast<double>(a.shape[1]);
      return;
    }
    case OpKind::Fma: // a multiply and an add an element
      cost_.vector_flops += 2.0 * static_cast<double>(std::max<int64_t>(1, k_.type(res).numel()));
      return;
    case OpKind::Reduce:
    case OpKind::ArgMax:
    case OpKind::Scan:
    case OpKind::Sort:
      if (is_float(k_.type(op.operands[0]).elem))
        cost_.vector_flops += static_cast<double>(k_.type(op.operands[0]).numel());
      return;
    case OpKind::Load: {
      const Type& t = k_.type(res);
      cost_.bytes_loaded += static_cast<double>(t.numel()) * dbytes(t.elem);
      return;
    }
    case OpKind::Store: {
      const Type& t = k_.type(op.operands[1]);
      cost_.bytes_stored += static_cast<double>(t.numel()) * dbytes(t.elem);
      return;
    }
    case OpKind::AtomicAdd: {
      const Type& t = k_.type(op.operands[1]);
      double b = static_cast<double>(t.numel()) * dbytes(t.elem);
      cost_.bytes_loaded += b;
      cost_.bytes_stored += b;
      return;
    }
    case OpKind::MakeBlockPtr: {
      const int r = k_.type(res).rank();
      BlockPtrState st;
      for (int d = 0; d < r; ++d) {
        st.shape.push_back(s(op.operands[static_cast<size_t>(1 + d)]));
        st.offsets.push_back(s(op.operands[static_cast<size_t>(1 + 2 * r + d)]));
      }
      blocks_[res] = st;
      return;
    }
    case OpKind::Advance: {
      auto it = blocks_.find(op.operands[0]);
      if (it == blocks_.end())
        return;
      BlockPtrState st = it->second;
      for (size_t d = 0; d < st.offsets.size(); ++d) {
        // Offsets move in i64, as the interpreter's block pointers do.
        const Scalar delta = s(op.operands[1 + d]);
        st.offsets[d] = st.offsets[d] && delta
                            ? eval_binary(BinaryOp::Add, eval_cast(*st.offsets[d], DType::i64),
                                          eval_cast(*delta, DType::i64))
                            : Scalar{};
      }
      blocks_[res] = st;
      return;
    }
    case OpKind::LoadBlock:
      cost_.bytes_loaded += block_elements(op.operands[0], op.checked_dims()) * dbytes(k_.type(res).elem);
      return;
    case OpKind::StoreBlock:
      cost_.bytes_stored +=
          block_elements(op.operands[0], op.checked_dims()) * dbytes(k_.type(op.operands[1]).elem);
      return;
    case OpKind::AtomicAddBlock: { // read and written, as a pointer tile's atomic_add
      const double b = block_elements(op.operands[0], op.checked_dims()) * dbytes(k_.type(op.operands[1]).elem);
      cost_.bytes_loaded += b;
      cost_.bytes_stored += b;
      return;
    }
    case OpKind::For:
      return visit_for(op);
    case OpKind::If: {
      // A condition computed from tensor data (a reduction) is unknown before the kernel runs: the model takes
      // the then branch, the common case by the kernels' convention (FA2's masked tiles with EXACT_MASKED_V=1
      // take their tensor-core product when V is finite, a key-by-key one otherwise).
      const ValueId cond = op.operands[0];
      const bool then_taken = !s(cond) && reduces_tensor_data(cond) ? true : need_int(cond, op, "condition") != 0;
      const Region& taken = op.regions[then_taken ? 0 : 1];
      walk_region(taken);
      carry_yield(taken, op.results);
      return;
    }
    default:
      return; // shape ops, arange, pointer arithmetic, yield: no cost, no scalar to track
    }
  }

  // Copies a region's yielded scalars and block pointers to `dest`.
  void carry_yield(const Region& r, llvm::ArrayRef<ValueId> dest) {
    if (r.ops.empty() || r.ops.back()->kind != OpKind::Yield)
      return;
    const Op& y = *r.ops.back();
    std::vector<Scalar> sv;
    std::vector<std::optional<BlockPtrState>> bv;
    for (ValueId v : y.operands) {
      sv.push_back(s(v));
      auto it = blocks_.find(v);
      bv.push_back(it == blocks_.end() ? std::nullopt : std::optional<BlockPtrState>(it->second));
    }
    for (size_t n = 0; n < dest.size() && n < sv.size(); ++n) {
      s(dest[n]) = sv[n];
      if (bv[n])
        blocks_[dest[n]] = *bv[n];
      else
        blocks_.erase(dest[n]);
    }
  }

  void copy_value(ValueId from, ValueId to) {
    s(to) = s(from);
    auto it = blocks_.find(from);
    if (it != blocks_.end())
      blocks_[to] = it->second;
    else
      blocks_.erase(to);
  }

  void visit_for(const Op& op) {
    const int64_t lo = need_int(op.operands[0], op, "lower bound"),
                  hi = need_int(op.operands[1], op, "upper bound"),
                  step = need_int(op.operands[2], op, "step");
    if (step <= 0)
      fail_at(op.loc, "performance model: for_range step must be positive, got {}", step);
    const Region& body = op.regions[0];
    const size_t carried = op.results.size();
    for (size_t n = 0; n < carried; ++n)
      copy_value(op.operands[3 + n], body.args[1 + n]);
    for (int64_t iv = lo; iv < hi; iv += step) {
      s(body.args[0]) = ScalarValue::of_int(iv, k_.type(body.args[0]).elem);
      walk_region(body);
      carry_yield(body, llvm::ArrayRef<ValueId>(body.args).drop_front(1));
    }
    for (size_t n = 0; n < carried; ++n)
      copy_value(body.args[1 + n], op.results[n]);
  }

  const Kernel& k_;
  Grid grid_;
  std::array<int64_t, 3> pid_{};
  std::vector<Scalar> scalars_;
  std::map<ValueId, BlockPtrState> blocks_;
  Cost cost_;
  int64_t visits_ = 0;
};

// How many op visits one estimate may spend (about a second); larger grids are sampled.
constexpr int64_t kOpVisitBudget = 100'000'000;

} // namespace

CostEstimate estimate_cost(const Kernel& k, const Grid& grid, const ScalarArgs& args, int64_t max_programs) {
  for (int64_t g : grid)
    if (g < 0)
      fail("performance model: grid ({}, {}, {}) has a negative dimension", grid[0], grid[1], grid[2]);
  for (const auto& [name, value] : args) {
    (void)value;
    bool known =
        std::any_of(k.params.begin(), k.params.end(), [&](const Param& p) { return p.name == name; });
    if (!known) {
      std::string names;
      for (const Param& p : k.params)
        if (k.type(p.value).is_tensor())
          names += (names.empty() ? "" : ", ") + p.name;
      fail("performance model: kernel '{}' has no scalar argument '{}'; its scalar arguments are: {}", k.name,
           name, names);
    }
  }
  CostEstimate e;
  e.programs = grid[0] * grid[1] * grid[2];
  if (e.programs == 0)
    return e;
  ProgramWalker walker(k, grid, args);
  // The last program usually does the most work (causal masks, tails): its op count sets how many
  // programs the evaluation budget affords.
  walker.run({grid[0] - 1, grid[1] - 1, grid[2] - 1});
  const int64_t affordable = std::max<int64_t>(1, kOpVisitBudget / std::max<int64_t>(1, walker.visits()));
  const int64_t limit = max_programs > 0 ? std::min(max_programs, affordable) : affordable;
  const int64_t stride = e.programs > limit ? (e.programs + limit - 1) / limit : 1;
  for (int64_t linear = 0; linear < e.programs; linear += stride) {
    std::array<int64_t, 3> pid{linear % grid[0], (linear / grid[0]) % grid[1], linear / (grid[0] * grid[1])};
    e.total += walker.run(pid);
    ++e.programs_evaluated;
  }
  if (e.programs_evaluated != e.programs) {
    double scale = static_cast<double>(e.programs) / static_cast<double>(e.programs_evaluated);
    e.total.matrix_flops *= scale;
    e.total.vector_flops *= scale;
    e.total.bytes_loaded *= scale;
    e.total.bytes_stored *= scale;
  }
  return e;
}

} // namespace kiln
