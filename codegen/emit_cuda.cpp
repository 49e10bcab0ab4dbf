#include "codegen/emit_cuda.h"

#include "codegen/emitter.h"
#include "codegen/prelude.h"
#include "dsl/printer.h"
#include "dsl/verifier.h"

#include <cmath>
#include <sstream>

namespace kiln::emit_detail {

std::string Emitter::regs(ValueId v, const Layout& want) {
  Placement p = plan_.where(v);
  if (p == Placement::Flexible)
    return materialize(v, want);
  KILN_INTERNAL_CHECK(p == Placement::Registers, "%{} is not in registers", v);
  const Layout& have = layout_of(v);
  if (have.same_bases(want))
    return name_.at(v);
  std::string key = conversion_key(v, want);
  if (std::string* c = cached(key)) // made earlier in this scope or an enclosing one
    return *c;
  const LayoutConversion& c = *planned_conversion(v, ConversionMethod::SharedMemory, &want);
  KILN_INTERNAL_CHECK(c.from.same_bases(have), "the plan converts %{} from {}, but it is in {}", v, c.from.str(),
                      have.str());
  std::string n = convert(name_.at(v), c);
  cache(key, n);
  return n;
}

const LayoutConversion* Emitter::planned_conversion(ValueId v, ConversionMethod method, const Layout* to,
                                                    bool optional) {
  for (size_t i = 0; i < plan_.conversions.size(); ++i) {
    const LayoutConversion& c = plan_.conversions[i];
    if (!conversion_made_[i] && c.user == reader_ && c.value == v && c.method == method &&
        (!to || c.to.same_bases(*to))) {
      conversion_made_[i] = true;
      return &c;
    }
  }
  KILN_INTERNAL_CHECK(optional, "{} at {} reads %{}{} {}, a conversion the plan lacks",
                      reader_ ? op_name(reader_->kind) : "?", reader_ ? reader_->loc.str() : "?", v,
                      to ? " in " + to->str() : std::string(), conversion_method_name(method));
  return nullptr;
}

// A layout conversion through shared memory: every thread writes what it holds at the element's
// row-major position, then reads what the new layout gives it.
std::string Emitter::convert(const std::string& src, const LayoutConversion& c) {
  KILN_INTERNAL_CHECK(c.method == ConversionMethod::SharedMemory, "convert: not through shared memory");
  const Layout& from = c.from;
  const Layout& to = c.to;
  use_scratch(c.scratch_bytes);
  const DType t = k_.type(c.value).elem;
  const Shape& from_shape = from.shape;
  std::string n = fresh("cvt");
  std::string ty = ctype(t);
  line("// convert {} -> {} through shared memory", from.str(), to.str());
  line("{} {}[{}];", ty, n, to.num_regs());
  line("{{");
  open();
  line("{0}* kiln_x = reinterpret_cast<{0}*>({1});", ty, scratch());
  line("{}", cta_barrier());
  for_regs(from.num_regs());
  line("  kiln_x[{}] = {}[r];", linear(from, from_shape, "r"), src);
  line("}}");
  line("{}", cta_barrier());
  for_regs(to.num_regs());
  line("  {}[r] = kiln_x[{}];", n, linear(to, to.shape, "r"));
  line("}}");
  close(); // no barrier after the reads: every user of the scratch starts with one
  line("}}");
  return n;
}

// Flexible values are recomputed in whatever layout a user wants them, from element coordinates.
std::string Emitter::materialize(ValueId v, const Layout& want) {
  std::string key = fmt::format("mat:{}:{}", v, layout_key(want));
  if (std::string* c = cached(key))
    return *c;
  const Op& op = *k_.info(v).def;
  const Type& t = k_.type(v);
  int R = want.num_regs();
  std::string n;
  auto operand = [&](ValueId x, const Layout& l) -> std::string {
    return k_.type(x).shape.empty() ? scalar(x) + "" : regs(x, l) + "[r]";
  };
  switch (op.kind) {
  case OpKind::Constant:
    n = declare_regs(v, want, "c");
    for_regs(R);
    line("  {}[r] = {};", n, literal(op.f, t.elem));
    line("}}");
    break;
  case OpKind::Arange:
    n = declare_regs(v, want, "range");
    for_regs(R);
    line("  {}[r] = {} + {};", n, op.arange_lo(), coord(want, 0, "r"));
    line("}}");
    break;
  case OpKind::ExpandDims:
    return regs(op.operands[0], squeeze_layout(want, op.axis)); // same registers, one dim fewer
  case OpKind::Broadcast: {
    ValueId x = op.operands[0];
    if (k_.type(x).shape.empty()) {
      n = splat(v, want, scalar(x));
      break;
    }
    // A flexible source is seen through the same registers; one held in registers is free when `want`
    // collapsed over the broadcast dims is its layout.
    Layout src = broadcast_source_layout(k_, plan_, x, want);
    if (plan_.where(x) == Placement::Flexible)
      return regs(x, src);
    std::string xs = regs(x, src);
    std::vector<int> map = broadcast_register_map(src, want);
    KILN_INTERNAL_CHECK(!map.empty(), "broadcast register map");
    n = declare_regs(v, want, "bcast");
    std::string m = fresh("bmap");
    line("constexpr int {}[{}] = {{{}}};", m, map.size(), fmt::join(map, ", "));
    for_regs(R);
    line("  {}[r] = {}[{}[r]];", n, xs, m);
    line("}}");
    break;
  }
  case OpKind::Trans:
    return regs(op.operands[0], trans_layout(want));
  case OpKind::Reshape: {
    ValueId x = op.operands[0];
    if (k_.type(x).shape.empty()) {
      n = splat(v, want, scalar(x));
      break;
    }
    std::string xs = regs(x, register_or_default_layout(k_, plan_, x));
    n = convert(xs, *planned_conversion(x, ConversionMethod::SharedMemory, &want));
    break;
  }
  case OpKind::Unary:
  case OpKind::Binary:
  case OpKind::Cast:
  case OpKind::Where:
  case OpKind::Fma:
  case OpKind::AddPtr: {
    std::vector<std::string> ins;
    for (ValueId x : op.operands)
      ins.push_back(operand(x, want));
    n = declare_regs(v, want);
    for_regs(R);
    DType in_t = k_.type(op.operands[0]).elem;
    std::string e;
    if (op.kind == OpKind::Unary)
      e = unary_text(op.unary, ins[0], in_t);
    else if (op.kind == OpKind::Binary)
      e = binary_expr(op.binary, ins[0], ins[1], in_t);
    else if (op.kind == OpKind::Cast)
      e = fmt::format("kiln::cvt<{}>({})", ctype(t.elem), ins[0]);
    else if (op.kind == OpKind::Where)
      e = fmt::format("({} ? {} : {})", ins[0], ins[1], ins[2]);
    else if (op.kind == OpKind::Fma)
      e = fma_expr(ins[0], ins[1], ins[2], in_t);
    else
      e = fmt::format("({} + {})", ins[0], ins[1]);
    line("  {}[r] = {};", n, e);
    line("}}");
    break;
  }
  default:
    throw InternalError(fmt::format("cannot materialize {}", op_name(op.kind)));
  }
  cache(key, n);
  return n;
}

// ---------------------------------------------------------------------------------------------

void Emitter::emit_region(const Region& r) {
  for (const auto& op : r.ops) {
    if (op->kind != OpKind::Yield)
      emit_op(*op);
    if (&r == &k_.body)
      for (const PersistentPrefetch& p : plan_.persistent.prefetches)
        if (plan_.producer_tiles.index_of(p.load) < 0 && // the producer copies its tiles itself
            (p.double_buffered() ? plan_.persistent.next_copies_after == op.get() : p.issue_after == op.get()))
          emit_next_program_copy(p);
  }
}

void Emitter::emit_op(const Op& op) {
  if (const ProductWait* w = plan_.products.before_op(op))
    emit_product_wait(*w, op);
  reader_ = &op;
  if (op.kind == OpKind::For) {
    emit_register_operands(op);
    emit_for(op);
    return forget_register_operands(op);
  }
  if (op.kind == OpKind::If)
    return emit_if(op);
  ValueId r = op.result();
  if (r != kNoValue) {
    Placement p = plan_.where(r);
    if (p == Placement::Flexible)
      return; // computed at its uses
    if (p == Placement::Scalar || p == Placement::BlockPtr)
      return emit_scalar_op(op);
  }
  line("// {} {}", op_name(op.kind), op.loc.str());
  switch (op.kind) {
  case OpKind::Cast:
    if (plan_.fused_casts.count(r))
      return;
    return emit_elementwise(op);
  case OpKind::Unary:
  case OpKind::Binary:
  case OpKind::Where:
  case OpKind::Fma:
  case OpKind::Rand:
  case OpKind::AddPtr:
    return emit_elementwise(op);
  case OpKind::ExpandDims:
  case OpKind::Trans:
    if (plan_.where(r) == Placement::Shared)
      return;
    name_[r] = regs(op.operands[0], op.kind == OpKind::Trans ? trans_layout(layout_of(r))
                                                             : squeeze_layout(layout_of(r), op.axis));
    return;
  case OpKind::Reshape: {
    ValueId x = op.operands[0];
    std::string src = regs(x, register_or_default_layout(k_, plan_, x));
    name_[r] = convert(src, *planned_conversion(x, ConversionMethod::SharedMemory, &layout_of(r)));
    return;
  }
  case OpKind::Reduce:
  case OpKind::ArgMax:
    return emit_reduce(op);
  case OpKind::Scan:
    return emit_scan(op);
  case OpKind::Sort:
    return emit_sort(op);
  case OpKind::Dot:
    return emit_dot(op);
  case OpKind::Load:
    return emit_pointer_load(op);
  case OpKind::Store:
  case OpKind::AtomicAdd:
    return emit_pointer_store(op);
  case OpKind::LoadBlock:
    return emit_block_load(op);
  case OpKind::StoreBlock:
    return emit_block_store(op);
  case OpKind::AtomicAddBlock:
    return emit_block_atomic_add(op);
  case OpKind::Constant:
  case OpKind::Arange:
    name_[r] = materialize(r, layout_of(r));
    return;
  // Handled above (scalars, block pointers, control flow) or by the enclosing op (yield). No default: a new
  // op kind must be given its printer here before the code generator compiles.
  // A tile broadcast is always flexible (assign_layouts): recomputed where it is read (materialize).
  case OpKind::Broadcast:
  case OpKind::ProgramId:
  case OpKind::NumPrograms:
  case OpKind::MakeBlockPtr:
  case OpKind::Advance:
  case OpKind::For:
  case OpKind::If:
  case OpKind::Yield:
    break;
  }
  throw InternalError(fmt::format("emit_cuda: {} is not a tile op", op_name(op.kind)));
}

void Emitter::emit_scalar_op(const Op& op) {
  ValueId r = op.result();
  const Type& t = k_.type(r);
  std::string n = fresh(value_hint(r));
  name_[r] = n;
  auto s = [&](int i) { return scalar(op.operands[i]); };
  std::string ty = t.is_block_ptr() ? "auto"
                   : t.is_pointer() ? ctype_of(t) + " const"
                                    : "const " + ctype_of(t);
  switch (op.kind) {
  case OpKind::Constant:
    line("{} {} = {};", ty, n, literal(op.f, t.elem));
    return;
  case OpKind::ProgramId: // a persistent grid's program id along x is its loop variable
    if (plan_.persistent.on && op.axis == 0)
      line("{} {} = {};", ty, n, program_id_override_.empty() ? "kiln_program" : program_id_override_);
    else
      line("{} {} = (int)blockIdx.{};", ty, n, "xyz"[op.axis]);
    return;
  case OpKind::NumPrograms:
    if (plan_.persistent.on && op.axis == 0)
      line("{} {} = kiln_programs;", ty, n);
    else
      line("{} {} = (int)gridDim.{};", ty, n, "xyz"[op.axis]);
    return;
  case OpKind::Unary:
    line("{} {} = {};", ty, n, unary_text(op.unary, s(0), k_.type(op.operands[0]).elem));
    return;
  case OpKind::Binary:
    line("{} {} = {};", ty, n, binary_expr(op.binary, s(0), s(1), k_.type(op.operands[0]).elem));
    return;
  case OpKind::Cast:
    line("{} {} = kiln::cvt<{}>({});", ty, n, ctype(t.elem), s(0));
    return;
  case OpKind::Where:
    line("{} {} = {} ? {} : {};", ty, n, s(0), s(1), s(2));
    return;
  case OpKind::Fma:
    line("{} {} = {};", ty, n, fma_expr(s(0), s(1), s(2), t.elem));
    return;
  case OpKind::Rand:
    need_helper("kiln::philox", std::string(philox_prelude_source()));
    line("{} {} = {};", ty, n, random_expr(op.random, s(0), s(1)));
    return;
  case OpKind::AddPtr:
    line("{} {} = {} + {};", ty, n, s(0), s(1));
    return;
  case OpKind::Reshape:
  case OpKind::Broadcast:
    line("{} {} = {};", ty, n, s(0));
    return;
  case OpKind::Load: {
    std::string value = op.has_mask ? fmt::format("{} ? *{} : {}", s(1), s(0), s(2)) : "*" + s(0);
    // Read through a warp reduction so that ptxas knows it is warp-uniform (plan_warp_uniform_scalars.h). Not in
    // the producer warpgroup, whose TMA copies one thread issues alone (or, on a dynamic persistent grid, one
    // warp, which issues no wgmma).
    if (plan_.uniform.load(op) && !in_producer_)
      value = warp_uniform_read(value);
    line("{} {} = {};", ty, n, value);
    return;
  }
  case OpKind::MakeBlockPtr: {
    int rank = t.rank();
    auto list = [&](int from) {
      std::string l;
      for (int d = 0; d < rank; ++d)
        l += (d ? ", " : "") + fmt::format("(long long)({})", s(from + d));
      return l;
    };
    line("kiln::BlockPtr<{}, {}> {} = {{{}, {{{}}}, {{{}}}, {{{}}}}};", ctype(t.elem), rank, n, s(0), list(1),
         list(1 + rank), list(1 + 2 * rank));
    return;
  }
  case OpKind::Advance: {
    std::string d;
    for (size_t i = 1; i < op.operands.size(); ++i)
      d += (i > 1 ? ", " : "") + fmt::format("(long long)({})", s(static_cast<int>(i)));
    line("auto {} = {}.advanced({{{}}});", n, s(0), d);
    return;
  }
  case OpKind::Reduce:
  case OpKind::ArgMax: {
    name_.erase(r);
    emit_reduce(op);
    return;
  }
  case OpKind::AtomicAdd:
    line("{} {} = kiln::atomic_add({}, {});", ty, n, s(0), s(1));
    return;
  default:
    throw InternalError(fmt::format("emit_cuda: unhandled scalar {}", op_name(op.kind)));
  }
}

void Emitter::emit_program() {
  if (plan_.bulk.any() && plan_.bulk.stages == 2)
    line("int kiln_bulk_stage = 0; // the bulk-reduction stage the next block atomic_add writes");
  if (!plan_.persistent.on) {
    emit_region(k_.body);
  } else {
    open_program_loop();
    emit_region(k_.body);
    close_program_loop();
  }
  if (plan_.bulk.any() || plan_.tma_stores.any()) // shared memory outlives no CTA: the bulk copies must have read it
    line("kiln::bulk_wait<0>(); // this thread's bulk reductions and TMA stores are done");
}

std::string Emitter::run() {
  conversion_made_.assign(plan_.conversions.size(), false);
  if (plan_.any_wgmma())
    need_helper("kiln::wgmma_support", wgmma_support_source());
  std::string params;
  for (size_t i = 0; i < k_.params.size(); ++i) {
    const Param& p = k_.params[i];
    std::string n = identifier(p.name);
    name_[p.value] = n;
    params += fmt::format("{}{} {}", i ? ", " : "", ctype_of(k_.type(p.value)), n);
  }
  if (plan_.tma.any()) {
    need_helper("kiln::tma", std::string(tma_prelude_source()));
    for (size_t i = 0; i < plan_.tma.maps.size(); ++i)
      params += fmt::format(", const __grid_constant__ kiln::TensorMap kiln_map{}", i);
    // Warp-specialised, the kernel runs only launches whose maps are legal (the others run
    // GeneratedKernel::illegal_maps_fallback): the argument is always 1 and the kernel does not read it.
    params += plan_.ws.on() ? ", int /* kiln_tma: always 1 here */" : ", int kiln_tma";
  }
  if (plan_.persistent.on)
    params += ", int kiln_programs";
  if (plan_.persistent.dynamic()) {
    params += ", int* kiln_program_counter";
    need_helper("kiln::tile_scheduler", std::string(tile_scheduler_prelude_source()));
  }
  if (plan_.ws.on())
    need_helper("kiln::warp_specialize", std::string(warp_specialize_prelude_source()));
  if (plan_.pingpong.on())
    need_helper("kiln::pingpong", std::string(pingpong_prelude_source()));
  if (plan_.ws.on()) {
    // One if/else whose branches are the warpgroups' roles: setmaxnreg takes effect only at the head of each.
    const WarpSpecialization& ws = plan_.ws;
    line("if (threadIdx.x >= {}) {{ // the producer warpgroup", threads_);
    open();
    in_producer_ = true;
    if (ws.producer_registers)
      line("kiln::setmaxnreg_dec<{}>(); // from {} at entry", ws.producer_registers, ws.entry_registers);
    emit_producer();
    in_producer_ = false;
    close();
    line("}} else {{ // the consumers: the program, without its copies");
    open();
    if (ws.consumer_registers)
      line("kiln::setmaxnreg_inc<{}>(); // from {} at entry", ws.consumer_registers, ws.entry_registers);
    if (plan_.pingpong.on())
      line("if (kiln_warp < 4) kiln::named_barrier_arrive({}, 256); // ping-pong: warpgroup 0 takes the first turn",
           PingPong::kFirstBarrier);
    emit_program();
    if (plan_.pingpong.on())
      line("if (kiln_warp < 4) kiln::named_barrier_sync({}, 256); // ping-pong: warpgroup 0 takes the last turn "
           "back (no arrival left pending)",
           PingPong::kFirstBarrier);
    close();
    line("}}");
  } else {
    emit_program();
  }
  std::string body = std::move(out_);
  for (size_t i = 0; i < conversion_made_.size(); ++i) {
    const LayoutConversion& c = plan_.conversions[i];
    KILN_INTERNAL_CHECK(conversion_made_[i], "the plan converts %{} for {} at {}, which the emitter never needed",
                        c.value, op_name(c.user->kind), c.loc().str());
  }
  // Exactly what was planned, except that a second reduction slot is used only where straight-line code lets a
  // reduction skip its barrier (emit_reduce), which the plan does not predict.
  KILN_INTERNAL_CHECK(largest_scratch_use_ == plan_.scratch_bytes ||
                          (plan_.reduction_slots == 2 && largest_scratch_use_ <= plan_.scratch_bytes),
                      "{} bytes of scratch planned, {} used", plan_.scratch_bytes, largest_scratch_use_);  // MIN_BLOCKS_PER_SM (an optional config parameter) caps registers so that many CTAs fit on an SM.
  std::string head =
      fmt::format("extern \"C\" __global__ void __launch_bounds__({}, {}) {}({}) {{\n",
                  threads_ + (plan_.ws.on() ? WarpSpecialization::kProducerThreads : 0),
                  k_.config.get_or("MIN_BLOCKS_PER_SM", 1), identifier(k_.name), params);
  head += "  extern __shared__ __align__(1024) unsigned char kiln_smem[];\n";
  head += "  const int kiln_lane = threadIdx.x % 32;\n  const int kiln_warp = threadIdx.x / 32;\n";
  head += program_ring_declarations() + tma_ring_declarations();
  for (const std::string& d : layout_decls_)
    head += "  " + d + "\n";
  std::string helpers;
  for (const auto& [name, source] : helpers_)
    helpers += source + "\n";
  return helpers + head + body + "}\n";
}

} // namespace kiln::emit_detail

namespace kiln {

std::string emit_cuda(const Kernel& k, const LoweringPlan& plan, const Target& target,
                        const CodegenOptions& options) {
  return emit_detail::Emitter(k, plan, target, options).run();
}

} // namespace kiln
