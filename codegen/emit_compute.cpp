// Emitter: elementwise ops and reductions (see emitter.h; broadcasts are recomputed where they are read).
#include "codegen/emitter.h"
#include "codegen/prelude.h"

namespace kiln::emit_detail {

void Emitter::emit_elementwise(const Op& op) {
  ValueId r = op.result();
  const Layout& L = layout_of(r);
  std::vector<std::string> ins;
  for (ValueId x : op.operands)
    ins.push_back(k_.type(x).shape.empty() ? scalar(x) : regs(x, L) + "[r]");
  std::string n = declare_regs(r, L);
  name_[r] = n;
  DType in_t = k_.type(op.operands[0]).elem;
  std::string e;
  switch (op.kind) {
  case OpKind::Unary:
    e = unary_text(op.unary, ins[0], in_t);
    if (plan_.exp2_on_fma.splits(op)) { // register r's choice is a constant of the unrolled loop
      need_helper("kiln::ex2_fma", std::string(ex2_fma_prelude_source()));
      const int every = plan_.exp2_on_fma.every;
      e = fmt::format("(r % {} == {} ? kiln::ex2_fma({}) : {})", every, every - 1, ins[0], e);
    }
    break;
  case OpKind::Binary:
    e = binary_expr(op.binary, ins[0], ins[1], in_t);
    break;
  case OpKind::Cast:
    e = fmt::format("kiln::cvt<{}>({})", ctype(k_.type(r).elem), ins[0]);
    break;
  case OpKind::Where:
    e = fmt::format("({} ? {} : {})", ins[0], ins[1], ins[2]);
    break;
  case OpKind::Fma:
    e = fma_expr(ins[0], ins[1], ins[2], in_t);
    break;
  case OpKind::Rand:
    need_helper("kiln::philox", std::string(philox_prelude_source()));
    e = random_expr(op.random, ins[0], ins[1]);
    break;
  default:
    e = fmt::format("({} + {})", ins[0], ins[1]);
    break;
  }
  auto assign = [&](const std::string& expr) {
    for_regs(L.num_regs());
    line("  {}[r] = {};", n, expr);
    line("}}");
  };
  // A loop accumulator's rescale by a row factor (plan_rescale_skips): skipped where the warp's factors are all 1.
  if (const RescaleSkip* skip = plan_.rescale_skips.of(op)) {
    const Layout& fl = layout_of(skip->factor);
    const std::string fs = regs(skip->factor, fl);
    std::vector<std::string> ones;
    for (int i = 0; i < fl.num_regs(); ++i)
      ones.push_back(fmt::format("{}[{}] == 1.0f", fs, i));
    // One vote a warp, so that the branch is uniform: the warp copies only where every lane's factors are 1
    // (multiplying by 1 elsewhere gives the same bits). Measured faster than a branch per thread (worklog §73).
    line("if (__all_sync(0xffffffffu, {})) {{ // {} is 1 in each row this warp holds: the rescale is skipped",
         fmt::join(ones, " && "), fs);
    open();
    assign(ins[skip->accumulator_operand]);
    close();
    line("}} else {{");
    open();
    assign(e);
    close();
    line("}}");
    return;
  }
  assign(e);
}

// Reduction along one dim: registers within a thread, then lanes by xor-shuffles, then warps through
// shared memory. Every thread ends with the result for the elements its slice layout gives it.
void Emitter::emit_reduce(const Op& op) {
  ValueId r = op.result(), x = op.operands[0];
  const Type& xt = k_.type(x);
  const Layout in = reduce_input_layout(k_, plan_, op);
  std::string xs = regs(x, in);
  Layout out = slice_layout(in, op.axis);
  ReductionPlan rp = reduction_plan(in, op.axis);
  bool arg = op.kind == OpKind::ArgMax;
  DType t = xt.elem;
  std::string ty = ctype(t);
  std::string n = fresh(value_hint(r));
  std::string idx = n + "_i";
  int RO = out.num_regs();
  // Map each input register to its output register: drop the register bits along the axis.
  std::vector<int> omap(in.num_regs());
  for (int ri = 0; ri < in.num_regs(); ++ri) {
    int o = 0, ob = 0;
    for (size_t b = 0; b < in.reg.size(); ++b) {
      bool along =
          std::find(rp.reg_bits.begin(), rp.reg_bits.end(), static_cast<int>(b)) != rp.reg_bits.end();
      bool zero_elsewhere = true;
      for (int d = 0; d < in.rank(); ++d)
        if (d != op.axis && in.reg[b][d])
          zero_elsewhere = false;
      if (along)
        continue;
      if (zero_elsewhere && in.reg[b][op.axis] == 0)
        continue; // a replica bit: same element
      if (ri >> b & 1)
        o |= 1 << ob;
      ++ob;
    }
    omap[ri] = o;
  }
  std::string m = fresh("rmap");
  line("// {} {} along axis {}", arg ? "argmax" : reduce_name(op.reduce), op.loc.str(), op.axis);
  line("constexpr int {}[{}] = {{{}}};", m, omap.size(), fmt::join(omap, ", "));
  line("{} {}[{}];", ty, n, RO);
  if (arg)
    line("int {}[{}];", idx, RO);
  for_regs(RO);
  line("  {}[r] = {};", n, reduce_identity(arg ? ReduceOp::Max : op.reduce, t));
  if (arg)
    line("  {}[r] = 0x7fffffff;", idx);
  line("}}");
  for_regs(in.num_regs());
  if (arg) {
    line("  int kiln_j = {};", coord(in, op.axis, "r"));
    line("  {0} kiln_v = {1}[r]; {0} kiln_b = {2}[{3}[r]];", ty, xs, n, m);
    line("  if (kiln::cvt<float>(kiln_v) > kiln::cvt<float>(kiln_b) || (kiln::cvt<float>(kiln_v) == "
         "kiln::cvt<float>(kiln_b) && kiln_j < {0}[{1}[r]])) {{ {2}[{1}[r]] = kiln_v; {0}[{1}[r]] = kiln_j; "
         "}}",
         idx, m, n);
  } else {
    line("  {0}[{1}[r]] = {2};", n, m, reduce_combine(op.reduce, n + "[" + m + "[r]]", xs + "[r]", t));
  }
  line("}}");
  for (int b : rp.lane_bits) {
    for_regs(RO);
    if (arg) {
      line("  {0} kiln_v = kiln::shfl_xor({1}[r], {2}); int kiln_j = kiln::shfl_xor({3}[r], {2});", ty, n,
           1 << b, idx);
      line("  if (kiln::cvt<float>(kiln_v) > kiln::cvt<float>({0}[r]) || (kiln::cvt<float>(kiln_v) == "
           "kiln::cvt<float>({0}[r]) && kiln_j < {1}[r])) {{ {0}[r] = kiln_v; {1}[r] = kiln_j; }}",
           n, idx);
    } else {
      // The shuffle is its own statement: every lane must execute it, and a combine may evaluate an operand
      // conditionally (an integer max is a ?:), which left some lanes out of the shuffle and hung the warp.
      line("  const {0} kiln_o = kiln::shfl_xor({1}[r], {2});", ty, n, 1 << b);
      line("  {0}[r] = {1};", n, reduce_combine(op.reduce, n + "[r]", "kiln_o", t));
    }
    line("}}");
  }
  if (!rp.warp_bits.empty()) {
    int64_t numel = 1;
    for (int64_t d : out.shape)
      numel *= d;
    int W = 1 << rp.warp_bits.size();
    int eb = std::max(4, dtype_bytes(t));
    // The slot: the one the last reduction since a barrier is not reading (then no barrier is needed before
    // writing it: every earlier reader of it has passed that barrier), or slot 0 after a barrier; otherwise
    // slot 0 behind a barrier.
    int slot = 0;
    bool barrier_first = true;
    if (scratch_reads_ == ScratchReads::None || scratch_reads_ == ScratchReads::ReductionSlot1) {
      barrier_first = false;
    } else if (scratch_reads_ == ScratchReads::ReductionSlot0 && plan_.reduction_slots == 2) {
      slot = 1;
      barrier_first = false;
    }
    const int64_t slot_offset = slot * plan_.reduction_slot_bytes;
    use_scratch(slot_offset + cross_warp_reduction_bytes(in, op.axis, t, arg));
    std::string wd = "0";
    for (size_t i = 0; i < rp.warp_bits.size(); ++i)
      wd += fmt::format(" + ((kiln_warp >> {}) & 1) * {}", rp.warp_bits[i], 1 << i);
    line("{{");
    open();
    const std::string base = slot_offset ? fmt::format("{} + {}", scratch(), slot_offset) : scratch();
    line("{0}* kiln_x = reinterpret_cast<{0}*>({1});", ty, base);
    line("int* kiln_xi = reinterpret_cast<int*>({} + {});", base, W * numel * eb);
    line("const int kiln_wd = {};", wd);
    if (barrier_first)
      line("{}", cta_barrier());
    else
      line("// no barrier first: no thread has read slot {} since the last barrier", slot);
    for_regs(RO);
    line("  kiln_x[kiln_wd * {} + {}] = {}[r];", numel, linear(out, out.shape, "r"), n);
    if (arg)
      line("  kiln_xi[kiln_wd * {} + {}] = {}[r];", numel, linear(out, out.shape, "r"), idx);
    line("}}");
    line("{}", cta_barrier());
    // Where every lane of a warp holds the same results (the reduced axis took all the lane bits) and a warp has
    // a lane for each warp's partial result, lane l reads warp l's and the lanes combine them by xor-shuffles:
    // one shared-memory read and log2(W) shuffles instead of W reads combined in a chain (the partials are
    // combined in a tree, as within a warp).
    const bool lanes_hold_the_same = std::all_of(out.lane.begin(), out.lane.end(), [](const Coord& c) {
      return std::all_of(c.begin(), c.end(), [](int64_t x) { return x == 0; });
    });
    if (!arg && lanes_hold_the_same && W <= 32) {
      for_regs(RO);
      line("  {}[r] = kiln_x[(kiln_lane % {}) * {} + {}];", n, W, numel, linear(out, out.shape, "r"));
      line("}}");
      for (int s = 1; s < W; s *= 2) {
        for_regs(RO);
        line("  const {0} kiln_o = kiln::shfl_xor({1}[r], {2});", ty, n, s);
        line("  {}[r] = {};", n, reduce_combine(op.reduce, n + "[r]", "kiln_o", t));
        line("}}");
      }
      close(); // no barrier after the reads: the next user of this slot starts with one
      line("}}");
      set_scratch_reads(slot ? ScratchReads::ReductionSlot1 : ScratchReads::ReductionSlot0);
      return finish_reduce(op, arg ? idx : n, out);
    }
    for_regs(RO);
    line("  {}[r] = kiln_x[{}];", n, linear(out, out.shape, "r"));
    if (arg)
      line("  {}[r] = kiln_xi[{}];", idx, linear(out, out.shape, "r"));
    line("  for (int w = 1; w < {}; ++w) {{", W);
    line("    {0} kiln_v = kiln_x[w * {1} + {2}];", ty, numel, linear(out, out.shape, "r"));
    if (arg) {
      line("    int kiln_j = kiln_xi[w * {} + {}];", numel, linear(out, out.shape, "r"));
      line("    if (kiln::cvt<float>(kiln_v) > kiln::cvt<float>({0}[r]) || (kiln::cvt<float>(kiln_v) == "
           "kiln::cvt<float>({0}[r]) && kiln_j < {1}[r])) {{ {0}[r] = kiln_v; {1}[r] = kiln_j; }}",
           n, idx);
    } else {
      line("    {}[r] = {};", n, reduce_combine(op.reduce, n + "[r]", "kiln_v", t));
    }
    line("  }}");
    line("}}");
    close(); // no barrier after the reads: the next user of this slot starts with one
    line("}}");
    set_scratch_reads(slot ? ScratchReads::ReductionSlot1 : ScratchReads::ReductionSlot0);
  }
  finish_reduce(op, arg ? idx : n, out);
}

// Names the reduction's result: a scalar, or the registers of its slice layout (expanded where keepdims).
void Emitter::finish_reduce(const Op& op, const std::string& result, const Layout& out) {
  const ValueId r = op.result();
  if (plan_.where(r) == Placement::Scalar) {
    std::string s = fresh(value_hint(r));
    line("const {} {} = {}[0];", ctype(k_.type(r).elem), s, result);
    name_[r] = s;
    return;
  }
  const Layout& want = layout_of(r);
  Layout have = op.keepdims ? expand_layout(out, op.axis) : out;
  KILN_INTERNAL_CHECK(have.same_bases(want), "reduce result layout");
  name_[r] = result;
}

} // namespace kiln::emit_detail
