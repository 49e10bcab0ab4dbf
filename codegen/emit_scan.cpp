// Emitter: scans (OpKind::Scan) through scratch shared memory, as codegen/plan_scan.h splits them.
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
  line("{}", cta_barrier());
  for_regs(in.num_regs());
  line("  kiln_s[{}] = {};", linear(in, xt.shape, "r"),
       acc_t == xt.elem ? xs + "[r]" : fmt::format("kiln::cvt<{}>({}[r])", acc, xs));
  line("}}");
  line("{}", cta_barrier());
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
  line("{}", cta_barrier());
  for_regs(out.num_regs());
  line("  {}[r] = {};", n,
       acc_t == xt.elem
           ? fmt::format("kiln_s[{}]", linear(out, xt.shape, "r"))
           : fmt::format("kiln::cvt<{}>(kiln_s[{}])", ctype(xt.elem), linear(out, xt.shape, "r")));
  line("}}");
  close(); // no barrier after the reads: every user of the scratch starts with one
  line("}}");
}

} // namespace kiln::emit_detail
