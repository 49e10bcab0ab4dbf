#include "codegen/analyze_contiguity.h"

#include "codegen/operand_layouts.h"
#include "codegen/pointer_roots.h"

#include <algorithm>

namespace kiln {

namespace {

// The coefficient with which a flexible integer (or pointer) tile changes along dimension `dim`:
// arange gives 1, splats and constants 0, sums add and products with a constant scale. nullopt when
// the tile is not affine along dim (or is computed by anything else).
std::optional<int64_t> affine_coeff(const Kernel& k, const LoweringPlan& plan, ValueId v, int dim) {
  if (plan.where(v) != Placement::Flexible)
    return k.type(v).shape.empty() ? std::optional<int64_t>(0) : std::nullopt;
  const Op& op = *k.info(v).def;
  const Type& t = k.type(v);
  auto sub = [&](int i, int d) { return affine_coeff(k, plan, op.operands[i], d); };
  auto constant_of = [&](ValueId x) -> std::optional<int64_t> {
    const Op* d = k.info(x).def;
    while (d && (d->kind == OpKind::Broadcast || d->kind == OpKind::Reshape || d->kind == OpKind::ExpandDims))
      d = k.info(d->operands[0]).def;
    if (d && d->kind == OpKind::Constant)
      return d->exact_int();
    return std::nullopt;
  };
  switch (op.kind) {
  case OpKind::Arange:
    return dim == 0 ? 1 : 0;
  case OpKind::Constant:
    return 0;
  case OpKind::Broadcast: {
    const Type& x = k.type(op.operands[0]);
    if (x.shape.empty() || x.shape[dim] == 1)
      return 0;
    return sub(0, dim);
  }
  case OpKind::ExpandDims:
    if (dim == op.axis)
      return 0;
    return sub(0, dim > op.axis ? dim - 1 : dim);
  case OpKind::Cast:
    return is_int(t.elem) && is_int(k.type(op.operands[0]).elem) ? sub(0, dim) : std::nullopt;
  case OpKind::AddPtr: {
    auto a = sub(0, dim), b = sub(1, dim);
    return a && b ? std::optional<int64_t>(*a + *b) : std::nullopt;
  }
  case OpKind::Binary: {
    if (!is_int(t.elem) || t.elem == DType::i1)
      return std::nullopt;
    auto a = sub(0, dim), b = sub(1, dim);
    if (op.binary == BinaryOp::Add && a && b)
      return *a + *b;
    if (op.binary == BinaryOp::Sub && a && b)
      return *a - *b;
    if (op.binary == BinaryOp::Mul) {
      if (auto c = constant_of(op.operands[1]); c && a)
        return *a * *c;
      if (auto c = constant_of(op.operands[0]); c && b)
        return *b * *c;
    }
    return std::nullopt;
  }
  default:
    return std::nullopt;
  }
}

// How many consecutive elements along the last dim `v` is known to hold in aligned runs: 1 when unknown. A
// max_contiguous hint on the value, or on the varying side of a sum whose other side does not vary along
// that dim (a base pointer plus hinted offsets), or through an integer cast.
int64_t hinted_contiguity(const Kernel& k, const LoweringPlan& plan, ValueId v, int dim) {
  if (k.info(v).contiguity > 1)
    return k.info(v).contiguity;
  const Op* op = k.info(v).def;
  if (!op)
    return 1;
  if (op->kind == OpKind::Cast && is_int(k.type(v).elem) && is_int(k.type(op->operands[0]).elem))
    return hinted_contiguity(k, plan, op->operands[0], dim);
  if (op->kind == OpKind::AddPtr || (op->kind == OpKind::Binary && op->binary == BinaryOp::Add)) {
    for (int i : {0, 1})
      if (affine_coeff(k, plan, op->operands[1 - i], dim) == std::optional<int64_t>(0))
        return hinted_contiguity(k, plan, op->operands[i], dim);
  }
  return 1;
}

int64_t floor_pow2(int64_t x) {
  int64_t p = 1;
  while (p * 2 <= x)
    p *= 2;
  return p;
}

// A block store writes up to 16 bytes of a thread's consecutive registers along the block's contiguous dim
// at once (the block's order says which dim that is; the run-time check of stride and alignment stays). Where
// the layout's threads hold shorter runs there (an mma accumulator holds column pairs), lane bits that continue
// the run are first traded for register bits (widen_register_run; plan_layout_conversions records the
// exchanges), as Triton converts an accumulator to a coalesced layout before storing it, without a trip
// through shared memory. Pieces of under 4 bytes are not worth it.
BlockAccessPlan block_store_plan(const Kernel& k, const LoweringPlan& plan, const CodegenOptions& options,
                                const Op& op) {
  const Type& bt = k.type(op.operands[0]);
  const int eb = dtype_bytes(bt.elem);
  if (!options.vectorize || bt.order.empty() || eb == 1 || eb > 8)
    return {};
  const int cdim = bt.order[0];
  const Layout stored = access_layout(k, plan, op);
  std::vector<LaneRegisterSwap> swaps;
  const int run = register_run(widen_register_run(stored, cdim, 16 / eb, swaps), cdim, 16 / eb);
  // 16-bit values cross lanes in packed pairs, so their run must start as pairs in registers.
  if (run * eb < 4 || (eb == 2 && !swaps.empty() && register_run(stored, cdim, 2) < 2))
    return {};
  return {run};
}

// A block load into registers reads each thread's run of consecutive registers along the block's contiguous
// dim in 16-byte pieces, one ld.global each (the run-time check of stride, alignment and bounds stays, with an
// element-by-element fallback). Shorter runs (the column pairs of an mma accumulator's row vectors) stay
// element by element: the two paths per piece cost registers that the attention backward's tiles do not have
// (fa2_bwd_dkdv at HEAD_DIM = 128 spilled on sm_80 with 8-byte pieces), for little gain.
BlockAccessPlan block_load_plan(const Kernel& k, const LoweringPlan& plan, const CodegenOptions& options,
                                const Op& op) {
  const Type& bt = k.type(op.operands[0]);
  const int eb = dtype_bytes(bt.elem);
  if (!options.vectorize || bt.order.empty() || eb == 1 || eb > 8)
    return {};
  const int run = register_run(plan.layout.at(op.result()), bt.order[0], 16 / eb);
  if (run * eb < 16)
    return {};
  return {run};
}

// An atomic add through a block pointer that adds from registers adds each thread's run of consecutive f32
// registers along the block's contiguous dim in pieces of 2 or 4, one vector reduction each (red.add.v2/v4.f32,
// sm_90 only; the run-time check of stride, alignment and bounds stays, with an element-by-element fallback), as a
// tensor of pointers does (LoweringPlan::accesses). No lanes are exchanged for it. On sm_80 the adds stay element
// by element: pieces there cost the backward's fused tiles registers (fa2_bwd_dkdv, ATOMIC_DQ=1 at
// D = 64: 72 bytes of spills against 68, worklog §85).
BlockAccessPlan block_add_plan(const Kernel& k, const LoweringPlan& plan, const Target& target,
                               const CodegenOptions& options, const Op& op) {
  const Type& bt = k.type(op.operands[0]);
  if (!options.vectorize || target.sm < 90 || bt.elem != DType::f32 || bt.order.empty())
    return {};
  const int run = register_run(access_layout(k, plan, op), bt.order[0], 4);
  return run >= 2 ? BlockAccessPlan{run} : BlockAccessPlan{};
}

} // namespace

void analyze_contiguity(const Kernel& k, const Target& target, const CodegenOptions& options,
                        LoweringPlan& plan) {
  PointerRoots roots(k);
  walk(k.body, [&](const Op& op) {
    if (op.kind == OpKind::StoreBlock)
      plan.block_accesses[&op] = block_store_plan(k, plan, options, op);
    if (op.kind == OpKind::LoadBlock && plan.where(op.result()) == Placement::Registers)
      plan.block_accesses[&op] = block_load_plan(k, plan, options, op);
    if (op.kind == OpKind::AtomicAddBlock)
      plan.block_accesses[&op] = block_add_plan(k, plan, target, options, op);
    if (op.kind != OpKind::Load && op.kind != OpKind::Store && op.kind != OpKind::AtomicAdd)
      return;
    AccessPlan a;
    ValueId ptrs = op.operands[0];
    const Type& t = k.type(ptrs);
    ValueId value = op.kind == OpKind::Load ? op.result() : op.operands[1];
    a.reduce_only = op.kind == OpKind::AtomicAdd && roots.reduces(op);
    // Vector atomics exist only as f32 reductions on sm_90 (red.add.v2/v4.f32).
    const bool may_vectorize = op.kind != OpKind::AtomicAdd ||
                               (a.reduce_only && k.type(value).elem == DType::f32 && target.sm >= 90);
    if (options.vectorize && may_vectorize && !t.shape.empty()) {
      const int last = t.rank() - 1;
      const int eb = dtype_bytes(t.elem);
      int64_t cap = 16 / eb;
      if (affine_coeff(k, plan, ptrs, last) != std::optional<int64_t>(1))
        cap = std::min(cap, floor_pow2(hinted_contiguity(k, plan, ptrs, last)));
      a.vector = cap > 1 ? register_run(access_layout(k, plan, op), last, static_cast<int>(cap)) : 1;
      if (op.kind == OpKind::AtomicAdd)
        a.vector = std::min(a.vector, 4);
      // multiple_of on the pointer tile: every address a multiple of that many bytes.
      a.aligned = a.vector > 1 && k.info(ptrs).divisibility % (a.vector * eb) == 0;
    }
    plan.accesses[&op] = a;
  });
}

} // namespace kiln
