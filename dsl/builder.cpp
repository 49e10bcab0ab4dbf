#include "dsl/builder.h"

#include "dsl/dsl.h"
#include "dsl/verifier.h"

#include <algorithm>
#include <tuple>

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
    b_->register_handle(this);
}
Value::Value(KernelBuilder& b, ValueId id) : b_(&b), id_(id) { b_->register_handle(this); }
Value::Value(const Value& o) : b_(o.b_ ? o.b_ : current_builder), id_(o.id_) {
  if (b_)
    b_->register_handle(this);
}
Value& Value::operator=(const Value& o) {
  if (o.b_ && o.b_ != b_) {
    if (b_)
      b_->live_.erase(this);
    b_ = o.b_;
    b_->register_handle(this);
  }
  id_ = o.id_;
  return *this;
}
Value::~Value() {
  if (b_)
    b_->live_.erase(this);
}

const Type& Value::type(CallSite where) const {
  if (!b_ || id_ == kNoValue)
    fail_at(loc_of(where), "use of a kiln::Value that holds no value (declared but never assigned, or its kernel "
            "was already finished)");
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
  for (auto& [v, seq] : live_) { // handles that outlive the builder become empty rather than dangling
    v->b_ = nullptr;
    v->id_ = kNoValue;
  }
  current_builder = previous_;
}

KernelBuilder& KernelBuilder::current(CallSite where) {
  if (!current_builder)
    fail_at(loc_of(where), "a DSL operation was called outside a kernel; create a kiln::KernelBuilder first");
  return *current_builder;
}

static void check_arg_name(const Kernel& k, const std::string& name, CallSite where) {
  if (name.empty())
    fail_at(loc_of(where), "kernel '{}': an argument needs a name", k.name);
  for (const Param& p : k.params)
    if (p.name == name)
      fail_at(loc_of(where), "kernel '{}' already has an argument named '{}' (argument {}); argument names must be "
              "unique", k.name, name, &p - k.params.data());
}

Value KernelBuilder::arg_ptr(const std::string& name, DType elem, CallSite where) {
  if (finished_)
    fail_at(loc_of(where), "arg_ptr('{}'): kernel '{}' is already finished", name, kernel_.name);
  if (elem == DType::i1)
    fail_at(loc_of(where), "arg_ptr('{}'): pointers to i1 are not supported; use u8 for booleans in memory", name);
  check_arg_name(kernel_, name, where);
  ValueId id = kernel_.new_value(Type::pointer(elem), name);
  kernel_.values[id].param_index = static_cast<int>(kernel_.params.size());
  kernel_.params.push_back(Param{name, id});
  return make(id);
}

Value KernelBuilder::arg(const std::string& name, DType t, CallSite where) {
  if (finished_)
    fail_at(loc_of(where), "arg('{}'): kernel '{}' is already finished", name, kernel_.name);
  if (t != DType::i32 && t != DType::i64 && t != DType::f32)
    fail_at(loc_of(where), "arg('{}'): scalar arguments are i32, i64 or f32, got {}{}", name, dtype_name(t),
            is_float(t) ? "; pass an f32 and convert it in the kernel with .to()" : "; pass an i32 or i64");
  check_arg_name(kernel_, name, where);
  ValueId id = kernel_.new_value(Type::scalar(t), name);
  kernel_.values[id].param_index = static_cast<int>(kernel_.params.size());
  kernel_.params.push_back(Param{name, id});
  return make(id);
}

Kernel KernelBuilder::finish(CallSite where) {
  if (finished_)
    fail_at(loc_of(where), "finish(): kernel '{}' was already finished", kernel_.name);
  if (insertion_.size() != 1)
    fail_at(loc_of(where), "finish() was called inside a for_range or if_ body of kernel '{}'; call it after "
            "the kernel body is complete", kernel_.name);
  verify(kernel_);
  Kernel out = std::move(kernel_);
  kernel_ = Kernel{};
  kernel_.name = out.name;
  finished_ = true;
  for (auto& [v, seq] : live_) // the values now belong to `out`; the handles are spent
    v->id_ = kNoValue;
  return out;
}

Value KernelBuilder::emit(std::unique_ptr<Op> op) {
  Op* raw = op.get();
  if (finished_)
    fail_at(raw->loc, "{}: kernel '{}' is already finished; every DSL call must come before finish()",
            op_name(raw->kind), kernel_.name);
  for (ValueId v : raw->operands)
    if (v < 0 || static_cast<size_t>(v) >= kernel_.values.size())
      fail_at(raw->loc, "{}: an operand holds no value (a kiln::Value declared but never assigned, or left "
              "over from a finished kernel)", op_name(raw->kind));
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
    if (o.is_float && !int_dtype_holds(t, o.f))
      fail_at(loc_of(where),
              "the literal {} is not an integer {} can hold, but it meets a value of type {}; write an integer "
              "literal, or convert the value with .to(f32)",
              o.f, dtype_name(t), dtype_name(t));
    int64_t v = o.is_float ? static_cast<int64_t>(o.f) : o.i;
    auto [lo, hi] = int_range(t);
    if (v < lo || v > hi)
      fail_at(loc_of(where),
              "the literal {} does not fit in {} (the type of the value it meets, range [{}, {}]); convert "
              "that value to a wider type with .to()",
              v, dtype_name(t), lo, hi);
    op->ints = {v};
    op->f = static_cast<double>(v);
  }
  op->results.push_back(kernel_.new_value(Type::scalar(t)));
  return emit(std::move(op));
}

Value KernelBuilder::operand(const Operand& o, DType literal_type) {
  if (!o.is_literal) {
    if (!o.value->valid())
      fail_at(loc_of(o.where), "an operand holds no value (a kiln::Value declared but never assigned, or left "
              "over from a finished kernel)");
    if (o.value->builder() != this)
      fail_at(loc_of(o.where), "an operand belongs to another kernel's builder; values cannot cross kernels");
    return *o.value;
  }
  return literal(o, literal_type, o.where);
}

// The live variables on entry to a region: which handles, and the value each held. A handle is
// identified by its address and its registration number, since a dead handle's address may be reused.
struct KernelBuilder::Snapshot {
  struct Var {
    Value* handle;
    uint64_t seq;
    ValueId id;
  };
  std::vector<Var> vars;  // holding a value, ordered by (value id, registration)
  std::vector<Var> empty; // declared but unassigned before the region
};

KernelBuilder::Snapshot KernelBuilder::snapshot() const {
  Snapshot s;
  for (const auto& [v, seq] : live_)
    (v->valid() ? s.vars : s.empty).push_back({v, seq, v->id_});
  // Ordered by value id, then by handle creation, so that carried values and results are numbered
  // deterministically (never by address).
  std::sort(s.vars.begin(), s.vars.end(),
            [](const Snapshot::Var& a, const Snapshot::Var& b) { return std::tie(a.id, a.seq) < std::tie(b.id, b.seq); });
  return s;
}

void KernelBuilder::check_region_escapes(const Snapshot& snap, ValueId first_inner, CallSite where,
                                         const char* what) const {
  std::unordered_map<const Value*, uint64_t> before;
  for (const Snapshot::Var& v : snap.vars)
    before.emplace(v.handle, v.seq);
  for (const Snapshot::Var& v : snap.empty)
    before.emplace(v.handle, v.seq);
  auto described = [&](const Value* v) {
    const std::string& name = kernel_.info(v->id_).name;
    return name.empty() ? std::string("a variable") : "variable '" + name + "'";
  };
  for (const Snapshot::Var& v : snap.empty)
    if (alive(v.handle, v.seq) && v.handle->valid())
      fail_at(loc_of(where),
              "{}: {} is assigned inside the {} body but had no value before it; give it an initial value "
              "(e.g. zeros(shape, dtype)) before the {} so that it can be carried out of it",
              what, described(v.handle), what, what);
  for (const auto& [v, seq] : live_) {
    auto it = before.find(v);
    bool from_before = it != before.end() && it->second == seq;
    if (!from_before && v->valid() && v->id_ >= first_inner)
      fail_at(loc_of(where),
              "{}: {} created inside the {} body outlives it (stored in a container or variable declared "
              "outside?); only variables that hold a value before the {} can be carried out of it",
              what, described(v), what, what);
  }
}

void KernelBuilder::for_range(const Operand& lo, const Operand& hi, const Operand& step,
                              const std::function<void(Value)>& body, CallSite where) {
  // The induction variable is i64 when any bound is; literals take its type.
  DType it = DType::i32;
  for (const Operand* o : {&lo, &hi, &step})
    if (!o->is_literal) {
      const Type& t = operand(*o, DType::i32).type();
      if (t.is_tensor() && t.elem == DType::i64)
        it = DType::i64;
    }
  Value bounds[3] = {operand(lo, it), operand(hi, it), operand(step, it)};
  const char* roles[3] = {"lower bound", "upper bound", "step"};
  for (int i = 0; i < 3; ++i) { // type errors in the bounds are reported before the body runs
    const Type& t = bounds[i].type();
    if (!t.is_tensor() || !t.is_scalar() || !is_int(t.elem) || t.elem == DType::i1)
      fail_at(loc_of(where), "for_range: the {} must be an integer scalar (i32 or i64), got {}{}", roles[i],
              t.str(),
              t.is_tensor() && !t.is_scalar() ? "; loop bounds are scalars, not tiles"
              : t.is_tensor() && is_float(t.elem) ? "; convert it with .to(i32)"
                                                  : "");
    if (t.elem != it)
      bounds[i] = bounds[i].to(it, where);
  }

  auto op = std::make_unique<Op>();
  Op* raw = op.get();
  raw->kind = OpKind::For;
  raw->loc = loc_of(where);
  for (Value& b : bounds)
    raw->operands.push_back(b.id());
  const ValueId first_inner = static_cast<ValueId>(kernel_.values.size());
  Region& region = raw->regions.emplace_back();
  ValueId iv = kernel_.new_value(Type::scalar(it), "i");
  region.args.push_back(iv);

  // Every live variable enters the body as a fresh region argument; those the body leaves untouched
  // are folded back to their outer value afterwards.
  Snapshot snap = snapshot();
  std::vector<ValueId> temps;
  for (Snapshot::Var& v : snap.vars) {
    ValueId t = kernel_.new_value(kernel_.type(v.id), kernel_.info(v.id).name);
    temps.push_back(t);
    v.handle->id_ = t;
  }
  insertion_.push_back(&region);
  {
    Value ivv = make(iv);
    body(ivv);
  }
  insertion_.pop_back();
  check_region_escapes(snap, first_inner, where, "for_range");

  auto yield = std::make_unique<Op>();
  yield->kind = OpKind::Yield;
  yield->loc = raw->loc;
  std::vector<size_t> carried;
  for (size_t i = 0; i < snap.vars.size(); ++i) {
    const Snapshot::Var& v = snap.vars[i];
    if (!alive(v.handle, v.seq) || v.handle->id_ == temps[i])
      continue;
    carried.push_back(i);
    yield->operands.push_back(v.handle->id_);
  }
  region.ops.push_back(std::move(yield));
  for (size_t i = 0; i < snap.vars.size(); ++i)
    if (std::find(carried.begin(), carried.end(), i) == carried.end())
      replace_uses(region, temps[i], snap.vars[i].id);

  for (size_t i : carried) {
    ValueId init = snap.vars[i].id;
    raw->operands.push_back(init);
    region.args.push_back(temps[i]);
    ValueId res = kernel_.new_value(kernel_.type(init), kernel_.info(init).name);
    raw->results.push_back(res);
  }
  emit(std::move(op)); // checks carried types, naming the variable
  for (size_t n = 0; n < carried.size(); ++n)
    snap.vars[carried[n]].handle->id_ = raw->results[n];
  for (size_t i = 0; i < snap.vars.size(); ++i) {
    const Snapshot::Var& v = snap.vars[i];
    if (alive(v.handle, v.seq) && v.handle->id_ == temps[i])
      v.handle->id_ = v.id;
  }
}

void KernelBuilder::if_(const Value& cond, const std::function<void()>& then_body,
                        const std::function<void()>& else_body, CallSite where) {
  auto op = std::make_unique<Op>();
  Op* raw = op.get();
  raw->kind = OpKind::If;
  raw->loc = loc_of(where);
  Value c = operand(Operand(cond, where), DType::i1);
  raw->operands.push_back(c.id());
  const Type& ct = c.type();
  if (ct != Type::scalar(DType::i1))
    fail_at(raw->loc, "if_: the condition must be a scalar i1 (a comparison of scalars, e.g. `n > 0`), got {}{}",
            ct.str(), ct.is_tensor() && !ct.is_scalar() ? "; to choose per element use where(cond, a, b)" : "");
  const ValueId first_inner = static_cast<ValueId>(kernel_.values.size());
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
    for (const Snapshot::Var& v : snap.vars) {
      bool alive_now = alive(v.handle, v.seq);
      after[branch].push_back(alive_now ? v.handle->id_ : v.id);
      if (alive_now)
        v.handle->id_ = v.id;
    }
  }
  check_region_escapes(snap, first_inner, where, "if_");
  std::vector<size_t> changed;
  for (size_t i = 0; i < snap.vars.size(); ++i)
    if (after[0][i] != snap.vars[i].id || after[1][i] != snap.vars[i].id)
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
    ValueId orig = snap.vars[i].id;
    raw->results.push_back(kernel_.new_value(kernel_.type(after[0][i]), kernel_.info(orig).name));
  }
  emit(std::move(op));
  for (size_t n = 0; n < changed.size(); ++n)
    snap.vars[changed[n]].handle->id_ = raw->results[n];
}

void KernelBuilder::build_combine(Op& op, DType t, const std::function<Value(Value, Value)>& fn, CallSite where) {
  const ValueId first_inner = static_cast<ValueId>(kernel_.values.size());
  Region& region = op.regions.emplace_back();
  region.args = {kernel_.new_value(Type::scalar(t), "a"), kernel_.new_value(Type::scalar(t), "b")};
  Snapshot snap = snapshot();
  insertion_.push_back(&region);
  ValueId result = kNoValue;
  {
    const Value r = fn(make(region.args[0]), make(region.args[1]));
    if (r.valid() && r.builder() != this)
      fail_at(loc_of(where), "associative_scan: the combine returned a value of another kernel's builder");
    result = r.id();
  }
  insertion_.pop_back();
  if (result == kNoValue)
    fail_at(loc_of(where), "associative_scan: the combine returned a kiln::Value that holds no value; return "
            "the combined scalar, e.g. `return a + b;`");
  for (const Snapshot::Var& v : snap.vars)
    if (alive(v.handle, v.seq) && v.handle->id_ != v.id) {
      const std::string& name = kernel_.info(v.id).name;
      fail_at(loc_of(where), "associative_scan: the combine assigns {} of the enclosing kernel; a combine only "
              "returns its result (it runs once per element pair, not once)",
              name.empty() ? std::string("a variable") : "variable '" + name + "'");
    }
  check_region_escapes(snap, first_inner, where, "associative_scan combine");
  auto yield = std::make_unique<Op>();
  yield->kind = OpKind::Yield;
  yield->loc = loc_of(where);
  yield->operands = {result};
  region.ops.push_back(std::move(yield));
}

} // namespace kiln
