#include "dsl/builder.h"

#include "dsl/dsl.h"
#include "dsl/verifier.h"

namespace kiln {

namespace {
thread_local KernelBuilder* current_builder = nullptr;

// Replaces every use of `from` by `to` in the region and the regions nested in it.
void replace_uses(Region& r, ValueId from, ValueId to) {
  for (auto& op : r.ops) {
    for (ValueId& v : op->operands)
      if (v == from)
        v = to;
    for (Region& sub : op->regions)
      replace_uses(sub, from, to);
  }
}
} // namespace

// ---- Value ----

Value::Value() : b_(current_builder) {
  if (b_)
    b_->live_.insert(this);
}
Value::Value(KernelBuilder* b, ValueId id) : b_(b), id_(id) {
  if (b_)
    b_->live_.insert(this);
}
Value::Value(const Value& o) : b_(o.b_ ? o.b_ : current_builder), id_(o.id_) {
  if (b_)
    b_->live_.insert(this);
}
Value& Value::operator=(const Value& o) {
  if (o.b_ && o.b_ != b_) {
    if (b_)
      b_->live_.erase(this);
    b_ = o.b_;
    b_->live_.insert(this);
  }
  id_ = o.id_;
  return *this;
}
Value::~Value() {
  if (b_)
    b_->live_.erase(this);
}

const Type& Value::type() const {
  if (!b_ || id_ == kNoValue)
    throw Error("use of a kiln::Value that holds no value (declared but never assigned)");
  return b_->kernel_.type(id_);
}

const Value& Value::named(std::string name) const {
  if (b_ && id_ != kNoValue)
    b_->kernel_.values[id_].name = std::move(name);
  return *this;
}

// ---- KernelBuilder ----

KernelBuilder::KernelBuilder(std::string name, Config config) : previous_(current_builder) {
  kernel_.name = std::move(name);
  kernel_.config = std::move(config);
  insertion_.push_back(&kernel_.body);
  current_builder = this;
}

KernelBuilder::~KernelBuilder() {
  for (Value* v : live_)
    v->b_ = nullptr; // handles that outlive the builder become empty rather than dangling
  current_builder = previous_;
}

KernelBuilder& KernelBuilder::current(CallSite where) {
  if (!current_builder)
    fail_at(loc_of(where), "a DSL operation was called outside a kernel; create a kiln::KernelBuilder first");
  return *current_builder;
}

Value KernelBuilder::arg_ptr(const std::string& name, DType elem, CallSite where) {
  if (elem == DType::i1)
    fail_at(loc_of(where), "argument '{}': pointers to i1 are not supported; use u8", name);
  ValueId id = kernel_.new_value(Type::pointer(elem), name);
  kernel_.values[id].param_index = static_cast<int>(kernel_.params.size());
  kernel_.params.push_back(Param{name, id});
  return make(id);
}

Value KernelBuilder::arg(const std::string& name, DType t, CallSite where) {
  if (t != DType::i32 && t != DType::i64 && t != DType::f32)
    fail_at(loc_of(where), "argument '{}': scalar arguments are i32, i64 or f32, got {}", name, dtype_name(t));
  ValueId id = kernel_.new_value(Type::scalar(t), name);
  kernel_.values[id].param_index = static_cast<int>(kernel_.params.size());
  kernel_.params.push_back(Param{name, id});
  return make(id);
}

Kernel KernelBuilder::finish() {
  if (insertion_.size() != 1)
    throw InternalError("finish() inside a region");
  for (const Param& p : kernel_.params)
    for (const Param& q : kernel_.params)
      if (&p != &q && p.name == q.name)
        fail("kernel '{}' has two arguments named '{}'", kernel_.name, p.name);
  verify(kernel_);
  Kernel out = std::move(kernel_);
  kernel_ = Kernel{};
  kernel_.body = Region{};
  return out;
}

Value KernelBuilder::emit(std::unique_ptr<Op> op) {
  Op* raw = op.get();
  std::optional<Type> t = infer_result_type(*raw, kernel_);
  if (t && raw->results.empty())
    raw->results.push_back(kernel_.new_value(*t));
  for (ValueId r : raw->results)
    kernel_.values[r].def = raw;
  insertion_.back()->ops.push_back(std::move(op));
  return raw->results.empty() ? Value() : make(raw->results[0]);
}

Value KernelBuilder::literal(const Operand& o, DType t, CallSite where) {
  auto op = std::make_unique<Op>();
  op->kind = OpKind::Constant;
  op->loc = loc_of(where);
  if (is_float(t))
    op->f = o.is_float ? o.f : static_cast<double>(o.i);
  else {
    if (o.is_float && o.f != static_cast<double>(static_cast<int64_t>(o.f)))
      fail_at(loc_of(where), "the literal {} is not an integer but meets an integer value of type {}", o.f,
              dtype_name(t));
    op->ints = {o.is_float ? static_cast<int64_t>(o.f) : o.i};
    op->f = static_cast<double>(op->ints[0]);
  }
  op->results.push_back(kernel_.new_value(Type::scalar(t)));
  return emit(std::move(op));
}

Value KernelBuilder::operand(const Operand& o, DType literal_type) {
  if (!o.is_literal) {
    if (!o.value->valid())
      fail_at(loc_of(o.where), "operand holds no value (a kiln::Value declared but never assigned)");
    return *o.value;
  }
  return literal(o, literal_type, o.where);
}

// The live variables on entry to a region: which handles, and the value each held.
struct KernelBuilder::Snapshot {
  std::vector<std::pair<Value*, ValueId>> vars;
  std::vector<Value*> empty; // declared but unassigned before the region
};

KernelBuilder::Snapshot KernelBuilder::snapshot() const {
  Snapshot s;
  for (Value* v : live_)
    (v->valid() ? (void)s.vars.emplace_back(v, v->id_) : (void)s.empty.push_back(v));
  // Order by value id so that carried values and results are numbered deterministically.
  std::sort(s.vars.begin(), s.vars.end(), [](auto& a, auto& b) { return a.second < b.second || (a.second == b.second && a.first < b.first); });
  return s;
}

static void check_empty_vars_untouched(const std::vector<Value*>& empty, const std::unordered_set<Value*>& live,
                                       CallSite where, const char* what) {
  for (Value* v : empty)
    if (live.count(v) && v->valid())
      fail_at(loc_of(where),
              "a variable assigned inside {} had no value before it; give it an initial value (e.g. zeros) "
              "before the {} so that it can be carried",
              what, what);
}

void KernelBuilder::for_range(const Operand& lo, const Operand& hi, const Operand& step,
                              const std::function<void(Value)>& body, CallSite where) {
  DType it = DType::i32;
  for (const Operand* o : {&lo, &hi, &step})
    if (!o->is_literal && o->value->valid() && o->value->dtype() == DType::i64)
      it = DType::i64;
  Value bounds[3] = {operand(lo, it), operand(hi, it), operand(step, it)};
  for (Value& b : bounds)
    if (b.type().is_scalar() && b.dtype() != it && is_int(b.dtype()) && b.dtype() != DType::i1)
      b = b.to(it, where);

  auto op = std::make_unique<Op>();
  Op* raw = op.get();
  raw->kind = OpKind::For;
  raw->loc = loc_of(where);
  for (Value& b : bounds)
    raw->operands.push_back(b.id());
  for (int i = 0; i < 3; ++i) // type errors in the bounds are reported before the body runs
    if (!kernel_.type(raw->operands[i]).is_scalar() || !is_int(kernel_.type(raw->operands[i]).elem))
      fail_at(raw->loc, "for_range: {} must be an integer scalar, got {}",
              i == 0 ? "lower bound" : i == 1 ? "upper bound" : "step", kernel_.type(raw->operands[i]).str());
  Region& region = raw->regions.emplace_back();
  ValueId iv = kernel_.new_value(Type::scalar(it), "i");
  region.args.push_back(iv);

  // Every live variable enters the body as a fresh region argument; those the body leaves untouched
  // are folded back to their outer value afterwards.
  Snapshot snap = snapshot();
  std::vector<ValueId> temps;
  for (auto& [v, init] : snap.vars) {
    ValueId t = kernel_.new_value(kernel_.type(init), kernel_.info(init).name);
    temps.push_back(t);
    v->id_ = t;
  }
  insertion_.push_back(&region);
  {
    Value ivv = make(iv);
    body(ivv);
  }
  insertion_.pop_back();
  check_empty_vars_untouched(snap.empty, live_, where, "for_range");

  auto yield = std::make_unique<Op>();
  yield->kind = OpKind::Yield;
  yield->loc = raw->loc;
  std::vector<size_t> carried;
  for (size_t i = 0; i < snap.vars.size(); ++i) {
    Value* v = snap.vars[i].first;
    if (!live_.count(v) || v->id_ == temps[i])
      continue;
    carried.push_back(i);
    yield->operands.push_back(v->id_);
  }
  region.ops.push_back(std::move(yield));
  for (size_t i = 0; i < snap.vars.size(); ++i)
    if (std::find(carried.begin(), carried.end(), i) == carried.end())
      replace_uses(region, temps[i], snap.vars[i].second);

  for (size_t i : carried) {
    ValueId init = snap.vars[i].second;
    raw->operands.push_back(init);
    region.args.push_back(temps[i]);
    ValueId res = kernel_.new_value(kernel_.type(init), kernel_.info(init).name);
    raw->results.push_back(res);
  }
  emit(std::move(op)); // checks carried types, naming the variable
  for (size_t n = 0; n < carried.size(); ++n) {
    Value* v = snap.vars[carried[n]].first;
    v->id_ = raw->results[n];
  }
  for (size_t i = 0; i < snap.vars.size(); ++i)
    if (live_.count(snap.vars[i].first) && snap.vars[i].first->id_ == temps[i])
      snap.vars[i].first->id_ = snap.vars[i].second;
}

void KernelBuilder::if_(const Value& cond, const std::function<void()>& then_body,
                        const std::function<void()>& else_body, CallSite where) {
  auto op = std::make_unique<Op>();
  Op* raw = op.get();
  raw->kind = OpKind::If;
  raw->loc = loc_of(where);
  raw->operands.push_back(cond.id());
  if (kernel_.type(cond.id()) != Type::scalar(DType::i1))
    fail_at(raw->loc, "if_: condition must be a scalar i1 (a comparison of scalars), got {}", cond.type().str());
  Snapshot snap = snapshot();
  std::vector<ValueId> after[2];
  raw->regions.reserve(2);
  for (int branch = 0; branch < 2; ++branch) {
    Region& region = raw->regions.emplace_back();
    insertion_.push_back(&region);
    if (branch == 0 && then_body)
      then_body();
    if (branch == 1 && else_body)
      else_body();
    insertion_.pop_back();
    for (auto& [v, orig] : snap.vars) {
      after[branch].push_back(live_.count(v) ? v->id_ : orig);
      if (live_.count(v))
        v->id_ = orig;
    }
  }
  check_empty_vars_untouched(snap.empty, live_, where, "if_");
  std::vector<size_t> changed;
  for (size_t i = 0; i < snap.vars.size(); ++i)
    if (after[0][i] != snap.vars[i].second || after[1][i] != snap.vars[i].second)
      changed.push_back(i);
  for (int branch = 0; branch < 2; ++branch) {
    auto yield = std::make_unique<Op>();
    yield->kind = OpKind::Yield;
    yield->loc = raw->loc;
    for (size_t i : changed)
      yield->operands.push_back(after[branch][i]);
    raw->regions[branch].ops.push_back(std::move(yield));
  }
  for (size_t i : changed) {
    ValueId orig = snap.vars[i].second;
    raw->results.push_back(kernel_.new_value(kernel_.type(after[0][i]), kernel_.info(orig).name));
  }
  emit(std::move(op));
  for (size_t n = 0; n < changed.size(); ++n)
    snap.vars[changed[n]].first->id_ = raw->results[n];
}

} // namespace kiln
