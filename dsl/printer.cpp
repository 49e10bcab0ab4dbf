#include "dsl/printer.h"

#include <llvm/ADT/ArrayRef.h>

namespace kiln {

std::string value_name(const Kernel& k, ValueId v) {
  const std::string& n = k.info(v).name;
  return n.empty() ? fmt::format("%{}", v) : fmt::format("%{}{}", n, v);
}

namespace {

struct Printer {
  const Kernel& k;
  std::string out;

  std::string names(llvm::ArrayRef<ValueId> vs, size_t from = 0) {
    std::string s;
    for (size_t i = from; i < vs.size(); ++i)
      s += (i > from ? ", " : "") + value_name(k, vs[i]);
    return s;
  }

  std::string attrs(const Op& op) {
    switch (op.kind) {
    case OpKind::Constant: return fmt::format(" {}", op.f);
    case OpKind::Arange: return fmt::format(" {}, {}", op.arange_lo(), op.arange_hi());
    case OpKind::ProgramId:
    case OpKind::NumPrograms:
    case OpKind::ExpandDims: return fmt::format(" axis={}", op.axis);
    case OpKind::Unary: return fmt::format(" {}", unary_name(op.unary));
    case OpKind::Binary: return fmt::format(" {}", binary_name(op.binary));
    case OpKind::Dot: return op.tf32 ? " tf32" : "";
    case OpKind::Rand: return op.random == RandomDist::Normal ? " normal" : " uniform";
    case OpKind::Reduce: return fmt::format(" {} axis={}{}", reduce_name(op.reduce), op.axis, op.keepdims ? " keepdims" : "");
    case OpKind::ArgMax: return fmt::format(" axis={}{}", op.axis, op.keepdims ? " keepdims" : "");
    case OpKind::Sort: return fmt::format(" axis={}{}", op.axis, op.reverse ? " descending" : "");
    case OpKind::Scan:
      return fmt::format(" {} axis={}{}", reduce_name(op.reduce), op.axis, op.reverse ? " reverse" : "");
    case OpKind::Load:
    case OpKind::Store:
    case OpKind::AtomicAdd: return op.has_mask ? " masked" : "";
    case OpKind::LoadBlock:
      return fmt::format(" boundary_check=[{}] padding={}", fmt::join(op.checked_dims(), ","),
                         padding_name(op.padding));
    case OpKind::StoreBlock:
    case OpKind::AtomicAddBlock: return fmt::format(" boundary_check=[{}]", fmt::join(op.checked_dims(), ","));
    default: return "";
    }
  }

  void line(int depth, const std::string& text, const SourceLoc& loc) {
    std::string s = std::string(2 * depth, ' ') + text;
    if (loc.known()) {
      if (s.size() < 72)
        s.resize(72, ' ');
      s += "  // " + loc.str();
    }
    out += s + "\n";
  }

  void region(const Region& r, int depth) {
    for (const auto& op : r.ops)
      print_op(*op, depth);
  }

  void print_op(const Op& op, int depth) {
    if (op.kind == OpKind::For) {
      const Region& body = op.regions[0];
      std::string carried;
      for (size_t i = 0; i < op.results.size(); ++i)
        carried += fmt::format("{}{} = {}", i ? ", " : "", value_name(k, body.args[i + 1]),
                               value_name(k, op.operands[3 + i]));
      std::string res = op.results.empty() ? "" : names(op.results) + " = ";
      line(depth,
           fmt::format("{}for {} = {} to {} step {}{} {{", res, value_name(k, body.args[0]),
                       value_name(k, op.operands[0]), value_name(k, op.operands[1]), value_name(k, op.operands[2]),
                       carried.empty() ? "" : " iter_args(" + carried + ")"),
           op.loc);
      region(body, depth + 1);
      line(depth, "}", {});
      return;
    }
    if (op.kind == OpKind::If) {
      std::string res = op.results.empty() ? "" : names(op.results) + " = ";
      line(depth, fmt::format("{}if {} {{", res, value_name(k, op.operands[0])), op.loc);
      region(op.regions[0], depth + 1);
      line(depth, "} else {", {});
      region(op.regions[1], depth + 1);
      line(depth, "}", {});
      return;
    }
    std::string res = op.results.empty() ? "" : names(op.results) + " = ";
    std::string ops = op.operands.empty() ? "" : " " + names(op.operands);
    std::string ty = op.results.empty() ? "" : " : " + k.type(op.results[0]).str();
    if (op.kind == OpKind::Scan && op.reduce == ReduceOp::Combine) { // the combine is part of the kernel
      line(depth, fmt::format("{}{}{}{}{} combine({}) {{", res, op_name(op.kind), attrs(op), ops, ty,
                              names(op.regions[0].args)), op.loc);
      region(op.regions[0], depth + 1);
      line(depth, "}", {});
      return;
    }
    line(depth, fmt::format("{}{}{}{}{}", res, op_name(op.kind), attrs(op), ops, ty), op.loc);
  }
};

} // namespace

std::string print_kernel(const Kernel& k) {
  Printer p{k, {}};
  std::string params;
  for (size_t i = 0; i < k.params.size(); ++i)
    params += fmt::format("{}{}: {}", i ? ", " : "", value_name(k, k.params[i].value), k.type(k.params[i].value).str());
  p.out += fmt::format("// config: {}\nkernel @{}({}) {{\n", k.config.str(), k.name, params);
  p.region(k.body, 1);
  p.out += "}\n";
  return p.out;
}

} // namespace kiln
