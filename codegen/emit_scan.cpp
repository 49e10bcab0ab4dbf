// Emitter: scans (OpKind::Scan) and sorts (OpKind::Sort) through scratch shared memory, the scans as
// codegen/plan_scan.h splits them.
#include "codegen/emitter.h"
#include "codegen/plan_scan.h"

namespace kiln::emit_detail {

void Emitter::emit_scan(const Op& op) {
  const ValueId r = op.result(), x = op.operands[0];
  const Type& xt = k_.type(x);
  const ScanSplit split = plan_scan(k_, op, threads_);
  const DType acc_t = scan_accumulator(xt.elem);
  const std::string acc = ctype(acc_t);
  const Layout in = register_or_default_layout(k_, plan_, x);
  const Layout& out = layout_of(r);
  const std::string xs = regs(x, in);
  const std::string n = declare_regs(r, out);
  name_[r] = n;
  const bool user = op.reduce == ReduceOp::Combine; // the user's combine, a lambda on x's dtype (see below)
  auto combine = [&](const std::string& a, const std::string& b) {
    if (!user)
      return reduce_combine(op.reduce, a, b, acc_t);
    if (acc_t == xt.elem)
      return fmt::format("kiln_combine({}, {})", a, b);
    // f16/bf16 staged in f32: every staged value is a combine's result or an element, so exact in x's dtype
    const std::string in = ctype(xt.elem);
    return fmt::format("kiln::cvt<{0}>(kiln_combine(kiln::cvt<{1}>({2}), kiln::cvt<{1}>({3})))", acc, in, a,
                       b);
  };
  // Scratch index of element q (in scan order) of the line whose first element is at `base`.
  auto at = [&](const std::string& base, const std::string& q) {
    const std::string along = op.reverse ? fmt::format("({} - ({}))", split.len - 1, q) : "(" + q + ")";
    return fmt::format("{} + {} * {}", base, along, split.stride);
  };
  auto line_base = [&](const std::string& l) {
    return fmt::format("(({0}) / {1}) * {2} + ({0}) % {1}", l, split.stride, split.len * split.stride);
  };
  line("// scan {} {} along axis {}{}: {} lines of {}, {} run{} a line", reduce_name(op.reduce), op.loc.str(),
       op.axis, op.reverse ? " (reverse)" : "", split.lines, split.len, split.chunks,
       split.chunks == 1 ? "" : "s");
  use_scratch(scan_scratch_bytes(k_, op));
  line("{{");
  open();
  line("{0}* kiln_s = reinterpret_cast<{0}*>({1});", acc, scratch());
  if (user) { // its ops printed as the same ops anywhere else in the kernel are, as scalars
    const Region& body = op.regions[0];
    for (ValueId a : body.args)
      name_[a] = fresh(value_hint(a));
    line("auto kiln_combine = [](const {0} {1}, const {0} {2}) -> {0} {{", ctype(xt.elem),
         name_[body.args[0]], name_[body.args[1]]);
    open();
    for (const auto& inner : body.ops)
      if (inner->kind != OpKind::Yield)
        emit_scalar_op(*inner);
    line("return {};", scalar(body.ops.back()->operands[0]));
    close();
    line("}};");
  }
  stage_to_scratch(op, in, xs, acc_t);
  if (split.chunks == 1) { // a thread a line
    line("for (int kiln_l = threadIdx.x; kiln_l < {}; kiln_l += {}) {{", split.lines, threads_);
    line("  const int kiln_b = {};", line_base("kiln_l"));
    line("  {} kiln_a = kiln_s[{}];", acc, at("kiln_b", "0"));
    line("  for (int q = 1; q < {}; ++q) {{", split.len);
    line("    kiln_a = {};", combine("kiln_a", "kiln_s[" + at("kiln_b", "q") + "]"));
    line("    kiln_s[{}] = kiln_a;", at("kiln_b", "q"));
    line("  }}");
    line("}}");
  } else { // runs of a line: scan each, then add the totals of the runs before it
    const int64_t run = split.run();
    line("const int kiln_c = threadIdx.x % {};", split.chunks);
    line("const bool kiln_on = threadIdx.x < {};", split.lines * split.chunks);
    line("const int kiln_b = {};", line_base(fmt::format("threadIdx.x / {}", split.chunks)));
    line("if (kiln_on) {{");
    line("  {} kiln_a = kiln_s[{}];", acc, at("kiln_b", fmt::format("kiln_c * {}", run)));
    line("  for (int q = kiln_c * {0} + 1; q < kiln_c * {0} + {0}; ++q) {{", run);
    line("    kiln_a = {};", combine("kiln_a", "kiln_s[" + at("kiln_b", "q") + "]"));
    line("    kiln_s[{}] = kiln_a;", at("kiln_b", "q"));
    line("  }}");
    line("}}");
    line("{}", cta_barrier());
    const std::string total = "kiln_s[" + at("kiln_b", fmt::format("c * {} + {}", run, run - 1)) + "]";
    line("{} kiln_carry{{}};", acc);
    line("if (kiln_on && kiln_c > 0) {{");
    line("  kiln_carry = kiln_s[{}];", at("kiln_b", std::to_string(run - 1)));
    line("  for (int c = 1; c < kiln_c; ++c)");
    line("    kiln_carry = {};", combine("kiln_carry", total));
    line("}}");
    line("{}", cta_barrier());
    line("if (kiln_on && kiln_c > 0) {{");
    line("  for (int q = kiln_c * {0}; q < kiln_c * {0} + {0}; ++q)", run);
    const std::string element = "kiln_s[" + at("kiln_b", "q") + "]";
    line("    {} = {};", element, combine("kiln_carry", element));
    line("}}");
  }
  read_back_from_scratch(op, acc_t);
  close(); // no barrier after the reads: every user of the scratch starts with one
  line("}}");
}

void Emitter::stage_to_scratch(const Op& op, const Layout& in, const std::string& xs, DType acc_t) {
  const Type& xt = k_.type(op.operands[0]);
  line("{}", cta_barrier());
  for_regs(in.num_regs());
  line("  kiln_s[{}] = {};", linear(in, xt.shape, "r"),
       acc_t == xt.elem ? xs + "[r]" : fmt::format("kiln::cvt<{}>({}[r])", ctype(acc_t), xs));
  line("}}");
  line("{}", cta_barrier());
}

void Emitter::read_back_from_scratch(const Op& op, DType acc_t) {
  const Type& xt = k_.type(op.operands[0]);
  const Layout& out = layout_of(op.result());
  line("{}", cta_barrier());
  for_regs(out.num_regs());
  line("  {}[r] = {};", name_.at(op.result()),
       acc_t == xt.elem
           ? fmt::format("kiln_s[{}]", linear(out, xt.shape, "r"))
           : fmt::format("kiln::cvt<{}>(kiln_s[{}])", ctype(xt.elem), linear(out, xt.shape, "r")));
  line("}}");
}

// A bitonic network on each line in scratch: for k = 2, 4, .., len and j = k/2, .., 1, element i (bit j
// clear) and i + j are compared and put in order, ascending where bit k of i is clear (descending: the
// reverse), a barrier after each step. The threads share the lines' len/2 pairs of a step. Floats in sort's
// total order (dsl/dsl.h): NaN last, -0 before +0.
void Emitter::emit_sort(const Op& op) {
  const ValueId r = op.result(), x = op.operands[0];
  const Type& xt = k_.type(x);
  const ScanSplit split = plan_scan(k_, op, threads_); // lines, len and stride (its runs are a scan's)
  const DType acc_t = scan_accumulator(xt.elem);
  const std::string acc = ctype(acc_t);
  const Layout in = register_or_default_layout(k_, plan_, x);
  const std::string xs = regs(x, in);
  name_[r] = declare_regs(r, layout_of(r));
  line("// bitonic sort {} along axis {}{}: {} lines of {}", op.loc.str(), op.axis,
       op.reverse ? " (descending)" : "", split.lines, split.len);
  use_scratch(scan_scratch_bytes(k_, op));
  line("{{");
  open();
  line("{0}* kiln_s = reinterpret_cast<{0}*>({1});", acc, scratch());
  if (is_float(acc_t)) // NaN last; -0 before +0 (1 / -0 is -inf)
    line("auto kiln_before = [](const {0} a, const {0} b) -> bool {{ return a < b || (a == a && b != b) || "
         "(a == 0 && b == 0 && 1 / a < 1 / b); }};",
         acc);
  else
    line("auto kiln_before = [](const {0} a, const {0} b) -> bool {{ return a < b; }};", acc);
  stage_to_scratch(op, in, xs, acc_t);
  const int64_t half = split.len / 2;
  line("for (int kiln_k = 2; kiln_k <= {}; kiln_k <<= 1) {{", split.len);
  line("  for (int kiln_j = kiln_k >> 1; kiln_j > 0; kiln_j >>= 1) {{");
  line("    for (int kiln_p = threadIdx.x; kiln_p < {}; kiln_p += {}) {{", split.lines * half, threads_);
  line("      const int kiln_h = kiln_p % {}, kiln_l = kiln_p / {};", half, half);
  line("      const int kiln_i = ((kiln_h & ~(kiln_j - 1)) << 1) | (kiln_h & (kiln_j - 1));");
  line("      const int kiln_b = (kiln_l / {0}) * {1} + kiln_l % {0};", split.stride,
       split.len * split.stride);
  line("      {0}& kiln_x = kiln_s[kiln_b + kiln_i * {1}];", acc, split.stride);
  line("      {0}& kiln_y = kiln_s[kiln_b + (kiln_i + kiln_j) * {1}];", acc, split.stride);
  line("      if (((kiln_i & kiln_k) == 0) == {} ? kiln_before(kiln_y, kiln_x) : kiln_before(kiln_x, "
       "kiln_y)) {{",
       op.reverse ? "false" : "true");
  line("        const {} kiln_t = kiln_x;", acc);
  line("        kiln_x = kiln_y;");
  line("        kiln_y = kiln_t;");
  line("      }}");
  line("    }}");
  line("    {}", cta_barrier());
  line("  }}");
  line("}}");
  read_back_from_scratch(op, acc_t);
  close(); // no barrier after the reads: every user of the scratch starts with one
  line("}}");
}

} // namespace kiln::emit_detail
