#include "codegen/plan_layout_conversions.h"

#include "codegen/defining_loops.h"
#include "codegen/operand_layouts.h"
#include "support/error.h"

#include <unordered_map>

namespace kiln {

const char* conversion_method_name(ConversionMethod m) {
  switch (m) {
  case ConversionMethod::RegisterShuffles:
    return "by register shuffles";
  case ConversionMethod::SharedOperand:
    return "into a shared operand tile that wgmma reads";
  case ConversionMethod::SharedMemory:
    break;
  }
  return "through shared memory";
}

namespace {

// Walks the kernel as the emitter prints it, reading every register operand in the layout its printer reads
// it in, and records a conversion wherever the value's own layout differs.
class ConversionPlanner {
public:
  ConversionPlanner(const Kernel& k, LoweringPlan& plan) : k_(k), plan_(plan), defs_(k.body) {}

  void region(const Region& r) {
    for (const auto& op : r.ops)
      if (op->kind != OpKind::Yield) // read by its parent
        this->op(*op);
  }

private:
  const Kernel& k_;
  LoweringPlan& plan_;
  const Op* reader_ = nullptr; // the op whose operands are being read: the user of what is converted

  // What the current scope and those around it have already made: conversions of register tiles into a
  // layout, and recomputations of flexible values in a layout. The emitter reuses both within a scope.
  struct Made {
    bool recomputed;
    ValueId value;
    Layout layout;
  };
  std::vector<std::vector<Made>> scopes_{1};

  bool made(bool recomputed, ValueId v, const Layout& l) const {
    for (const auto& scope : scopes_)
      for (const Made& m : scope)
        if (m.recomputed == recomputed && m.value == v && m.layout.same_bases(l))
          return true;
    return false;
  }
  void remember(bool recomputed, ValueId v, const Layout& l) { scopes_.back().push_back({recomputed, v, l}); }

  DefiningLoops defs_;
  // The loops around what is being read, outermost first, each with the index of the scope around it.
  struct OpenLoop {
    const Op* loop;
    size_t outer_scope;
  };
  std::vector<OpenLoop> loops_;
  // The outermost open loop that does not define `v` (its value is the same in every iteration of that loop),
  // or nullptr.
  const OpenLoop* hoist_target(ValueId v) const {
    const size_t k = defs_.first_invariant(loops_, [](const OpenLoop& l) { return l.loop; }, v);
    return k < loops_.size() ? &loops_[k] : nullptr;
  }
  void open() { scopes_.emplace_back(); }
  void close() { scopes_.pop_back(); }

  const Layout& layout_of(ValueId v) const { return plan_.layout.at(v); }
  bool is_scalar(ValueId v) const { return k_.type(v).shape.empty(); }

  // Every thread writes what it holds at the element's row-major position and reads back what `to` gives it:
  // scratch for the whole tile in its element type (a predicate as one byte).
  void through_shared_memory(ValueId v, const Layout& from, const Layout& to) {
    LayoutConversion c{v, reader_, from, to, ConversionMethod::SharedMemory, 0, {}};
    int64_t numel = 1;
    for (int64_t d : to.shape)
      numel *= d;
    const DType t = k_.type(v).elem;
    c.scratch_bytes = numel * (t == DType::i1 ? 1 : dtype_bytes(t));
    plan_.conversions.push_back(std::move(c));
  }

  // `v` read in layout `want`.
  void read(ValueId v, const Layout& want) {
    const Placement p = plan_.where(v);
    if (p == Placement::Flexible)
      return recompute(v, want);
    KILN_INTERNAL_CHECK(p == Placement::Registers, "%{} is not in registers", v);
    const Layout& have = layout_of(v);
    if (have.same_bases(want) || made(false, v, want))
      return;
    through_shared_memory(v, have, want);
    if (const OpenLoop* outer = hoist_target(v)) { // made once before that loop, and known from there on
      plan_.conversions.back().hoisted_before = outer->loop;
      scopes_[outer->outer_scope].push_back({false, v, want});
      return;
    }
    remember(false, v, want);
  }

  // A flexible value recomputed in layout `want` from its operands (the emitter's materialize).
  void recompute(ValueId v, const Layout& want) {
    if (made(true, v, want))
      return;
    const Op& def = *k_.info(v).def;
    switch (def.kind) {
    case OpKind::Constant:
    case OpKind::Arange:
      break;
    case OpKind::ExpandDims:
      return read(def.operands[0], squeeze_layout(want, def.axis)); // the same registers, not remembered
    case OpKind::Trans:
      return read(def.operands[0], trans_layout(want));
    case OpKind::Broadcast: {
      const ValueId x = def.operands[0];
      if (is_scalar(x))
        break;
      if (plan_.where(x) == Placement::Flexible)
        return read(x, broadcast_source_layout(k_, plan_, x, want));
      read(x, broadcast_source_layout(k_, plan_, x, want));
      break;
    }
    case OpKind::Reshape: {
      const ValueId x = def.operands[0];
      if (is_scalar(x))
        break;
      const Layout src = register_or_default_layout(k_, plan_, x);
      read(x, src);
      through_shared_memory(x, src, want);
      break;
    }
    case OpKind::Unary:
    case OpKind::Binary:
    case OpKind::Cast:
    case OpKind::Where:
    case OpKind::Fma:
    case OpKind::AddPtr:
      for (ValueId x : def.operands)
        if (!is_scalar(x))
          read(x, want);
      break;
    default:
      throw InternalError(fmt::format("plan_layout_conversions: cannot recompute {}", op_name(def.kind)));
    }
    remember(true, v, want);
  }

  void op(const Op& op) {
    reader_ = &op;
    if (op.kind == OpKind::For)
      return for_loop(op);
    if (op.kind == OpKind::If)
      return if_op(op);
    const ValueId r = op.result();
    if (r != kNoValue) {
      const Placement p = plan_.where(r);
      if (p == Placement::Flexible)
        return; // recomputed where it is read
      if (p == Placement::Scalar || p == Placement::BlockPtr) {
        if (op.kind == OpKind::Reduce || op.kind == OpKind::ArgMax) // a tile reduced to a scalar
          read(op.operands[0], reduce_input_layout(k_, plan_, op));
        return;
      }
    }
    switch (op.kind) {
    case OpKind::Cast:
      if (plan_.fused_casts.count(r))
        return; // read by its dot, from its source
      [[fallthrough]];
    case OpKind::Unary:
    case OpKind::Binary:
    case OpKind::Where:
    case OpKind::Fma:
    case OpKind::Rand:
    case OpKind::AddPtr:
      for (ValueId x : op.operands)
        if (!is_scalar(x))
          read(x, layout_of(r));
      return;
    case OpKind::ExpandDims:
    case OpKind::Trans:
      if (plan_.where(r) == Placement::Shared)
        return;
      read(op.operands[0],
           op.kind == OpKind::Trans ? trans_layout(layout_of(r)) : squeeze_layout(layout_of(r), op.axis));
      return;
    case OpKind::Reshape: {
      const ValueId x = op.operands[0];
      const Layout src = register_or_default_layout(k_, plan_, x);
      read(x, src);
      through_shared_memory(x, src, layout_of(r));
      return;
    }
    case OpKind::Reduce:
    case OpKind::ArgMax:
      return read(op.operands[0], reduce_input_layout(k_, plan_, op));
    case OpKind::Sort:
    case OpKind::Scan: // staged in shared memory from its own layout (or the default), read back in the result's
      return read(op.operands[0], register_or_default_layout(k_, plan_, op.operands[0]));
    case OpKind::Dot:
      return dot(op);
    case OpKind::Load:
      read(op.operands[0], layout_of(r));
      if (op.has_mask) {
        read(op.operands[1], layout_of(r));
        read(op.operands[2], layout_of(r));
      }
      return;
    case OpKind::Store:
    case OpKind::AtomicAdd: {
      if (op.kind == OpKind::Store && is_scalar(op.operands[1]))
        return; // a scalar store: one thread writes the value every thread holds
      const Layout L = access_layout(k_, plan_, op);
      read(op.operands[0], L);
      read(op.operands[1], L);
      if (op.has_mask)
        read(op.operands[2], L);
      return;
    }
    case OpKind::StoreBlock:
      return block_store(op);
    case OpKind::AtomicAddBlock: // element by element or through the stage, in the value's own layout
      return read(op.operands[1], access_layout(k_, plan_, op));
    case OpKind::Constant:
    case OpKind::Arange:
      return recompute(r, layout_of(r));
    case OpKind::Broadcast:
      throw InternalError("plan_layout_conversions: a tile broadcast is recomputed where it is read");
    case OpKind::LoadBlock: // into shared memory or registers: no register operand
    case OpKind::ProgramId:
    case OpKind::NumPrograms:
    case OpKind::MakeBlockPtr:
    case OpKind::Advance:
    case OpKind::For:
    case OpKind::If:
    case OpKind::Yield:
      return;
    }
  }

  void dot(const Op& op) {
    const ValueId a = op.operands[0], b = op.operands[1];
    read(op.operands[2], layout_of(op.result()));
    const bool a_in_registers = plan_.where(a) != Placement::Shared;
    const bool b_in_registers = plan_.where(b) != Placement::Shared;
    switch (plan_.dots.at(&op).instruction) {
    case DotInstruction::Wgmma:
      if (a_in_registers && stages_a_in_shared_memory(op))
        return;
      if (a_in_registers) { // read inside the block that issues the warpgroup's products
        open();
        read(dot_a_register_value(k_, plan_, op), dot_a_layout(k_, plan_, op));
        close();
      }
      return;
    case DotInstruction::MmaSync:
      if (a_in_registers)
        read(dot_a_register_value(k_, plan_, op), dot_a_layout(k_, plan_, op));
      if (b_in_registers)
        read(b, dot_b_layout(k_, plan_, op));
      return;
    case DotInstruction::Fma: // staged through shared memory as they are
      if (a_in_registers)
        read(a, dot_a_layout(k_, plan_, op));
      if (b_in_registers)
        read(b, dot_b_layout(k_, plan_, op));
      return;
    }
  }

  // A register A operand that is not in the A layout would go through shared memory and back into registers,
  // where the product holds it for its whole issue (the fused backward's dS: 32 registers a thread that the
  // dK/dV accumulators need). Written once to a K-major operand tile instead, it is read by the product's
  // descriptors. Products issued in turn, ahead or late keep their register operand (their issue order is
  // planned around it).
  bool stages_a_in_shared_memory(const Op& op) {
    const ValueId a = op.operands[0];
    if (dot_a_register_value(k_, plan_, op) != a || plan_.where(a) != Placement::Registers ||
        plan_.pingpong.dots.count(&op) || plan_.ahead.loop_of(op) || plan_.is_deferred_dot(op) || plan_.late.plans(op))
      return false;
    const Layout& have = plan_.layout.at(a);
    const Layout want = dot_a_layout(k_, plan_, op);
    if (have.same_bases(want))
      return false;
    const Type& t = k_.type(a);
    plan_.conversions.push_back({a, &op, have, want, ConversionMethod::SharedOperand, t.numel() * dtype_bytes(t.elem),
                                 {}, nullptr, stmatrix_store(have, dtype_bytes(t.elem))});
    return true;
  }

  void block_store(const Op& op) {
    const ValueId v = op.operands[1];
    const Layout stored = access_layout(k_, plan_, op);
    read(v, stored);
    if (plan_.block_accesses.at(&op).piece == 0)
      return;
    const Type& block = k_.type(op.operands[0]);
    const int per_16_bytes = 16 / dtype_bytes(block.elem);
    LayoutConversion c{v, &op, stored, {}, ConversionMethod::RegisterShuffles, 0, {}};
    c.to = widen_register_run(stored, block.order[0], per_16_bytes, c.swaps);
    if (!c.swaps.empty())
      plan_.conversions.push_back(std::move(c));
  }

  void for_loop(const Op& op) {
    const Region& body = op.regions[0];
    for (size_t i = 0; i < op.results.size(); ++i) // the carried values start as the inits
      if (plan_.where(body.args[i + 1]) == Placement::Registers)
        read(op.operands[3 + i], layout_of(body.args[i + 1]));
    loops_.push_back({&op, scopes_.size() - 1});
    open();
    region(body);
    yield(*body.ops.back(), [&](size_t i) { return body.args[i + 1]; });
    close();
    loops_.pop_back();
  }

  void if_op(const Op& op) {
    for (const Region& branch : op.regions) {
      open();
      region(branch);
      yield(*branch.ops.back(), [&](size_t i) { return op.results[i]; });
      close();
    }
  }

  // A yield's values read in the layouts of what they become (`target(i)` for operand i).
  template <typename Target> void yield(const Op& y, Target target) {
    reader_ = &y;
    for (size_t i = 0; i < y.operands.size(); ++i)
      if (plan_.where(target(i)) == Placement::Registers)
        read(y.operands[i], layout_of(target(i)));
  }
};

} // namespace

void plan_layout_conversions(const Kernel& k, LoweringPlan& plan) {
  plan.conversions.clear();
  ConversionPlanner(k, plan).region(k.body);
}

} // namespace kiln
