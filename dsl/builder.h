// Building a Kernel from C++: the Value handle that DSL code passes around, implicit operands
// (values and C++ literals), and the KernelBuilder that owns the IR under construction.
//
// Loop-carried state is written as C++ variables that a loop body reassigns. Every live Value
// registers itself with the builder, so that for_range/if_ can see which variables a body changed
// and turn exactly those into loop-carried values or if results (see builder.cpp).
#pragma once

#include "dsl/ir.h"

#include <llvm/ADT/ArrayRef.h>

#include <functional>
#include <source_location>
#include <unordered_map>

namespace kiln {

using CallSite = std::source_location;
inline SourceLoc loc_of(const CallSite& c) { return SourceLoc{c.file_name(), static_cast<unsigned>(c.line())}; }

class KernelBuilder;

// A handle to an IR value under construction (a tile, a scalar or a block pointer).
class Value {
public:
  Value();
  Value(const Value& o);
  Value& operator=(const Value& o);
  ~Value();

  // False for a handle that was declared but never assigned, or whose kernel was finished or whose
  // builder is gone: such handles are empty, and using one is an Error, never a dangling access.
  bool valid() const { return id_ != kNoValue; }
  ValueId id() const { return id_; }
  const KernelBuilder* builder() const { return b_; }
  // An Error at the caller's line when the handle is empty.
  const Type& type(CallSite where = CallSite::current()) const;
  const Shape& shape(CallSite where = CallSite::current()) const { return type(where).shape; }
  DType dtype(CallSite where = CallSite::current()) const { return type(where).elem; }
  int rank(CallSite where = CallSite::current()) const { return type(where).rank(); }

  Value to(DType t, CallSite where = CallSite::current()) const;
  Value expand_dims(int axis, CallSite where = CallSite::current()) const;
  Value trans(CallSite where = CallSite::current()) const;
  Value reshape(Shape s, CallSite where = CallSite::current()) const;
  Value broadcast_to(Shape s, CallSite where = CallSite::current()) const;
  // Names the value for the printer and for generated CUDA ("acc" becomes acc0, acc1, ...).
  const Value& named(std::string name) const;

private:
  friend class KernelBuilder;
  // Takes the builder by reference so that a braced pair like `{0, 1}` can never convert to a
  // Value: `load(bp, {0, 1})` must pick the boundary_check overload.
  Value(KernelBuilder& b, ValueId id);
  KernelBuilder* b_ = nullptr;
  ValueId id_ = kNoValue;
};

// One operand of a DSL call: a Value or a C++ literal, with the call site of the expression.
// Literals take the dtype of the value they meet (Triton's rule for Python scalars).
struct Operand {
  Operand(const Value& v, CallSite w = CallSite::current()) : value(&v), where(w) {}
  Operand(int v, CallSite w = CallSite::current()) : i(v), is_literal(true), where(w) {}
  Operand(int64_t v, CallSite w = CallSite::current()) : i(v), is_literal(true), where(w) {}
  Operand(double v, CallSite w = CallSite::current()) : f(v), is_literal(true), is_float(true), where(w) {}
  Operand(float v, CallSite w = CallSite::current()) : f(v), is_literal(true), is_float(true), where(w) {}

  const Value* value = nullptr;
  int64_t i = 0;
  double f = 0;
  bool is_literal = false;
  bool is_float = false;
  CallSite where;
};

struct BoundaryCheck {
  BoundaryCheck() = default;
  BoundaryCheck(std::initializer_list<int> d) : dims(d) {}
  llvm::SmallVector<int, 2> dims;
};

class KernelBuilder {
public:
  KernelBuilder(std::string name, Config config = {});
  ~KernelBuilder();
  KernelBuilder(const KernelBuilder&) = delete;
  KernelBuilder& operator=(const KernelBuilder&) = delete;

  // Kernel parameters, in call order: a global pointer to `elem`, or a scalar (i32, i64, f32).
  Value arg_ptr(const std::string& name, DType elem, CallSite where = CallSite::current());
  Value arg(const std::string& name, DType t, CallSite where = CallSite::current());

  const Config& config() const { return kernel_.config; }
  // Verifies the kernel and hands it over; the builder is finished afterwards, and every Value
  // handle on it is empty.
  Kernel finish(CallSite where = CallSite::current());

  // The builder of the kernel being built on this thread; an Error when there is none.
  static KernelBuilder& current(CallSite where);

  // ---- for the DSL functions (dsl.h) ----
  // Appends an op at the insertion point, infers (and so verifies) its result type, and returns
  // a handle to its result (an invalid Value for ops without one).
  Value emit(std::unique_ptr<Op> op);
  Value make(ValueId id) { return Value(*this, id); }
  Value literal(const Operand& o, DType t, CallSite where);
  Value operand(const Operand& o, DType literal_type);
  Kernel& kernel() { return kernel_; }
  void for_range(const Operand& lo, const Operand& hi, const Operand& step, const std::function<void(Value)>& body,
                 CallSite where);
  void if_(const Value& cond, const std::function<void()>& then_body, const std::function<void()>& else_body,
           CallSite where);
  // Builds `op`'s region 0 as a combine of two scalars of dtype `t`: fn's ops and a yield of its result. The
  // verifier checks what it holds when `op` is emitted.
  void build_combine(Op& op, DType t, const std::function<Value(Value, Value)>& fn, CallSite where);

private:
  friend class Value;
  struct Snapshot; // the live variables before a region, and their values
  Snapshot snapshot() const;

  Kernel kernel_;
  std::vector<Region*> insertion_; // innermost region last
  // Every Value handle alive on this builder, with the order it registered in: snapshots sort
  // handles that hold the same value by it, so that the IR does not depend on addresses.
  std::unordered_map<Value*, uint64_t> live_;
  uint64_t next_handle_ = 0;
  bool finished_ = false;
  KernelBuilder* previous_ = nullptr;

  void register_handle(Value* v) { live_.emplace(v, next_handle_++); }
  // Whether the handle registered as `seq` is still alive (its address may have been reused).
  bool alive(const Value* v, uint64_t seq) const {
    auto it = live_.find(const_cast<Value*>(v));
    return it != live_.end() && it->second == seq;
  }
  // Errors for variables that a region left in a state that cannot be carried out of it.
  void check_region_escapes(const Snapshot& snap, ValueId first_inner, CallSite where, const char* what) const;
};

} // namespace kiln
