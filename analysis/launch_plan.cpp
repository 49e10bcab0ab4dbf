// Launch plans: scalar values (given or derived as dense block-pointer strides) and the element ranges each
// pointer parameter reaches, read off the address analysis (analysis/address_analysis.h).
#include "analysis/launch_plan.h"

#include "analysis/address_analysis.h"
#include "support/error.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <optional>
#include <random>

namespace kiln {

namespace {

bool is_int_param(const Kernel& k, size_t i) {
  const Type& t = k.info(k.params[i].value).type;
  return !t.is_pointer() && is_int(t.elem);
}

std::string name_of(const Kernel& k, ValueId v) {
  const ValueInfo& info = k.info(v);
  if (info.param_index >= 0)
    return k.params[static_cast<size_t>(info.param_index)].name;
  return info.name.empty() ? "?" : info.name;
}

// Derives, from every block pointer whose stride operand is an integer parameter without a value, the
// stride of a dense tensor of the pointer's shape in its order. Returns whether anything was derived.
bool derive_block_strides(const Kernel& k, const AddressAnalysis& a, std::map<int, int64_t>& ints,
                          std::map<int, std::string>& origins) {
  bool derived = false;
  for (const Op* make : a.block_ptr_ops()) {
    const Type& t = k.type(make->result());
    const int r = t.rank();
    int64_t dense = 1; // the stride the next dim in order has in a dense tensor
    std::string shape_text;
    for (int d = 0; d < r; ++d) {
      const ValueId s = make->operands[static_cast<size_t>(1 + d)];
      const Interval v = a.val(s).range;
      shape_text +=
          fmt::format("{}{}={}", d ? ", " : "", name_of(k, s), v.is_exact() ? std::to_string(v.lo) : "?");
    }
    for (size_t j = 0; j < t.order.size(); ++j) {
      const int d = t.order[j];
      const ValueId stride = make->operands[static_cast<size_t>(1 + r + d)];
      const int p = k.info(stride).param_index;
      if (p >= 0 && is_int_param(k, static_cast<size_t>(p)) && !ints.count(p)) {
        ints[p] = dense;
        origins[p] = fmt::format("the dense stride of dim {} of the ({}) block pointer over '{}', order ({})",
                                 d, shape_text, name_of(k, make->operands[0]), fmt::join(t.order, ", "));
        derived = true;
      }
      const Interval extent = a.val(make->operands[static_cast<size_t>(1 + d)]).range;
      std::optional<int64_t> next =
          extent.is_exact() ? exact_offset_op(BinaryOp::Mul, dense, std::max<int64_t>(extent.lo, 1))
                            : std::nullopt;
      if (!next)
        break; // later dims' dense strides are unknown until this extent is
      dense = *next;
    }
  }
  return derived;
}

} // namespace

const PlannedArg& LaunchPlan::arg(const std::string& name) const {
  for (const PlannedArg& a : args)
    if (a.name == name)
      return a;
  throw InternalError("launch plan of '" + kernel + "' has no argument '" + name + "'");
}

int64_t LaunchPlan::bytes_read() const {
  int64_t n = 0;
  for (const PlannedArg& a : args)
    if (a.is_buffer() && a.read)
      n += a.bytes();
  return n;
}

int64_t LaunchPlan::bytes_written() const {
  int64_t n = 0;
  for (const PlannedArg& a : args)
    if (a.is_buffer() && a.written)
      n += a.bytes();
  return n;
}

LaunchPlan plan_launch(const Kernel& k, const Grid& grid, const ArgValues& given) {
  std::vector<std::string> scalar_names;
  for (const Param& p : k.params)
    if (!k.info(p.value).type.is_pointer())
      scalar_names.push_back(p.name);
  std::map<int, int64_t> ints;
  std::map<int, std::string> origins;
  for (const auto& [name, value] : given) {
    auto it = std::find_if(k.params.begin(), k.params.end(), [&](const Param& p) { return p.name == name; });
    if (it == k.params.end() || k.info(it->value).type.is_pointer())
      fail("kernel '{}' has no scalar argument '{}'; its scalar arguments are: {}", k.name, name,
           fmt::join(scalar_names, ", "));
    const int index = static_cast<int>(it - k.params.begin());
    if (is_int_param(k, static_cast<size_t>(index))) {
      const DType t = k.info(it->value).type.elem;
      if (!int_dtype_holds(t, value))
        fail("kernel '{}': argument '{}' is {}, which takes integers in [{}, {}]; got {}", k.name, name,
             dtype_name(t), int_range(t).first, int_range(t).second, value);
      ints[index] = static_cast<int64_t>(value);
      origins[index] = "given";
    }
  }
  for (const int64_t g : grid)
    if (g < 0)
      fail("kernel '{}': grid ({}, {}, {}) has a negative dimension", k.name, grid[0], grid[1], grid[2]);

  // Strides of block pointers can be derived once the shapes they depend on are known, which may itself take
  // a derived stride (never in practice more than a couple of rounds).
  for (size_t round = 0; round <= k.params.size(); ++round) {
    AddressAnalysis a(k, grid, ints);
    if (!derive_block_strides(k, a, ints, origins))
      break;
  }
  std::vector<std::string> missing;
  for (size_t i = 0; i < k.params.size(); ++i)
    if (is_int_param(k, i) && !ints.count(static_cast<int>(i)))
      missing.push_back(k.params[i].name);
  if (!missing.empty())
    fail("kernel '{}' needs a value for its integer argument{} {}: only sizes and strides of block pointers "
         "(as a dense tensor in the pointer's order) are found without one; give {} as NAME=VALUE",
         k.name, missing.size() > 1 ? "s" : "", fmt::join(missing, ", "), missing.size() > 1 ? "them" : "it");

  const AddressAnalysis a(k, grid, ints);
  LaunchPlan plan;
  plan.kernel = k.name;
  for (size_t i = 0; i < k.params.size(); ++i) {
    const Param& p = k.params[i];
    const Type& t = k.info(p.value).type;
    PlannedArg arg;
    arg.name = p.name;
    arg.dtype = t.elem;
    if (t.is_pointer()) {
      arg.kind = PlannedArg::Kind::Buffer;
      auto it = a.accesses().find(static_cast<int>(i));
      if (it != a.accesses().end()) {
        const ParamAccess& acc = it->second;
        if (acc.unbounded)
          fail_at(
              acc.unbounded->loc,
              "kernel '{}': cannot bound the elements of '{}' that this {} reaches: its addresses depend on "
              "loaded data, a float, or a value that changes without a bounded step; run it from a host "
              "harness that knows its buffers' sizes",
              k.name, p.name, op_name(acc.unbounded->kind));
        arg.read = acc.read;
        arg.written = acc.written;
        if (acc.touched) {
          arg.lo = std::min<int64_t>(0, acc.range.lo);
          arg.hi = std::max<int64_t>(1, acc.range.hi + 1);
        }
      }
    } else if (is_int(t.elem)) {
      arg.kind = PlannedArg::Kind::Int;
      arg.value = static_cast<double>(ints.at(static_cast<int>(i)));
      arg.origin = origins.at(static_cast<int>(i));
    } else {
      arg.kind = PlannedArg::Kind::Float;
      auto it = given.find(p.name);
      arg.value = it != given.end() ? it->second : 1.0;
      arg.origin = it != given.end() ? "given" : "default";
    }
    plan.args.push_back(std::move(arg));
  }
  return plan;
}

LaunchPlan merge_plans(const std::vector<LaunchPlan>& plans) {
  KILN_INTERNAL_CHECK(!plans.empty(), "merge_plans needs at least one plan");
  LaunchPlan merged = plans.front();
  for (const LaunchPlan& p : plans) {
    KILN_INTERNAL_CHECK(p.args.size() == merged.args.size(), "plans of '{}' disagree on the argument count",
                        merged.kernel);
    for (size_t i = 0; i < p.args.size(); ++i) {
      PlannedArg& m = merged.args[i];
      const PlannedArg& a = p.args[i];
      KILN_INTERNAL_CHECK(a.name == m.name && a.kind == m.kind, "plans of '{}' disagree on argument {}",
                          merged.kernel, i);
      if (m.is_buffer()) {
        m.lo = std::min(m.lo, a.lo);
        m.hi = std::max(m.hi, a.hi);
        m.read |= a.read;
        m.written |= a.written;
      } else {
        KILN_INTERNAL_CHECK(m.value == a.value, "plans of '{}' give '{}' the values {} and {}", merged.kernel,
                            m.name, m.value, a.value);
      }
    }
  }
  return merged;
}

HostBuffer random_buffer(const PlannedArg& a, uint64_t seed) {
  KILN_INTERNAL_CHECK(a.is_buffer(), "'{}' is not a buffer argument", a.name);
  HostBuffer b(a.dtype, a.elements(), a.name);
  std::mt19937_64 rng(seed);
  if (is_float(a.dtype)) {
    std::uniform_real_distribution<double> u(-1.0, 1.0);
    for (int64_t i = 0; i < b.numel(); ++i)
      b.set(i, u(rng));
  } else {
    std::uniform_int_distribution<int64_t> u(0, a.dtype == DType::i1 ? 1 : 15);
    for (int64_t i = 0; i < b.numel(); ++i)
      b.set_int(i, u(rng));
  }
  return b;
}

} // namespace kiln
