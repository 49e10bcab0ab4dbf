#include "codegen/block_base.h"

#include "dsl/registry.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <limits>

namespace kiln {

namespace {

constexpr int64_t kMostCoordinate = std::numeric_limits<int32_t>::max();

// Whether `op` casts an integer to an integer type at least as wide: the value is unchanged.
bool is_widening_int_cast(const Kernel& k, const Op& op) {
  if (op.kind != OpKind::Cast)
    return false;
  const DType from = k.type(op.operands[0]).elem, to = k.type(op.result()).elem;
  return is_int(from) && is_int(to) && from != DType::i1 && dtype_rank(to) >= dtype_rank(from);
}

std::string where(const Kernel& k, ValueId v) {
  const Op* def = k.info(v).def;
  return def ? def->loc.str() : fmt::format("%{}", v);
}

// a + b and a * b on magnitudes, nullopt past what a coordinate may hold (nothing beyond is of use).
std::optional<int64_t> bounded(__int128 m) {
  if (m > kMostCoordinate)
    return std::nullopt;
  return static_cast<int64_t>(m);
}

// The integer parameter P when `v` is min(x, P) or min(P, x) (through widening casts): |v| <= P wherever v >= 0,
// which nonneg_conditions proves separately. A bound known only at launch: the map's dim is P + 1 long.
std::optional<int> parameter_cap(const Kernel& k, ValueId v) {
  const Op* def = k.info(v).def;
  while (def && is_widening_int_cast(k, *def))
    def = k.info(def->operands[0]).def;
  if (!def || def->kind != OpKind::Binary || def->binary != BinaryOp::Min)
    return std::nullopt;
  for (ValueId side : def->operands)
    if (k.info(side).param_index >= 0 && is_int(k.type(side).elem))
      return k.info(side).param_index;
  return std::nullopt;
}

// The for loop whose induction variable is `v`, or null.
const Op* loop_of_induction_variable(const Kernel& k, ValueId v) {
  const Op* found = nullptr;
  walk(k.body, [&](const Op& op) {
    if (op.kind == OpKind::For && !op.regions.empty() && !op.regions[0].args.empty() && op.regions[0].args[0] == v)
      found = &op;
  });
  return found;
}

// a * b, both known at launch; nullopt where their constants' product overflows.
std::optional<LaunchScalar> times(const LaunchScalar& a, const LaunchScalar& b) {
  LaunchScalar r = a;
  r.params.insert(r.params.end(), b.params.begin(), b.params.end());
  if (__builtin_mul_overflow(a.constant, b.constant, &r.constant))
    return std::nullopt;
  return r;
}

// `v` as `x * s` with s known at launch (the right factor when both are): {x, s}; nullopt when it is no product
// with such a factor.
std::optional<std::pair<ValueId, LaunchScalar>> scaled_by_launch_scalar(const Kernel& k, ValueId v) {
  const Op* def = k.info(v).def;
  if (!def || def->kind != OpKind::Binary || def->binary != BinaryOp::Mul)
    return std::nullopt;
  for (int s : {1, 0})
    if (auto stride = launch_scalar(k, def->operands[static_cast<size_t>(s)]))
      return std::pair{def->operands[static_cast<size_t>(1 - s)], *stride};
  return std::nullopt;
}

// Whether `v` is a sum, or a product with a factor known at launch (through widening casts): a coordinate whose
// parts may be terms of their own where the whole has no bound.
bool splits(const Kernel& k, ValueId v) {
  const Op* def = k.info(v).def;
  while (def && is_widening_int_cast(k, *def))
    def = k.info(def->operands[0]).def;
  if (!def)
    return false;
  return (def->kind == OpKind::Binary && def->binary == BinaryOp::Add) ||
         scaled_by_launch_scalar(k, def->result()).has_value();
}

// Appends the terms of the i64 offset `v` * `scale` (added to a pointer; scale known at launch) to `terms`; false
// with `why` when a part of it is not `coordinate * launch scalar`. A coordinate that cannot be bounded as a whole
// but is a sum, or a product with a factor known at launch, is taken apart: `(b * H + h) * N` is b at stride
// H * N and h at stride N, each bounded on its own.
bool collect_terms(const Kernel& k, ValueId v, const LaunchScalar& scale, std::vector<OuterDim>& terms,
                   std::string& why) {
  const Op* def = k.info(v).def;
  if (def && def->kind == OpKind::Binary && def->binary == BinaryOp::Add)
    return collect_terms(k, def->operands[0], scale, terms, why) &&
           collect_terms(k, def->operands[1], scale, terms, why);
  if (def && is_widening_int_cast(k, *def))
    return collect_terms(k, def->operands[0], scale, terms, why);
  OuterDim term;
  term.coordinate = v; // a term of the scale's stride (1: legal only for 16-byte elements, which the launch checks)
  term.stride = scale;
  if (def && def->kind == OpKind::Binary && def->binary == BinaryOp::Mul) {
    // coordinate * stride: the stride is the factor the launch knows (the right one when both are).
    const auto product = scaled_by_launch_scalar(k, v);
    if (!product) {
      why = fmt::format(
          "the offset added to the base at {} multiplies two values computed in the kernel; a tensor "
          "map needs each term's stride known at launch",
          where(k, v));
      return false;
    }
    std::optional<LaunchScalar> stride = times(scale, product->second);
    if (!stride) {
      why = fmt::format("the stride of the term at {} overflows 64 bits", where(k, v));
      return false;
    }
    term.coordinate = product->first;
    term.stride = *stride;
  }
  auto bound = magnitude_bound(k, term.coordinate);
  const std::optional<int> cap = bound ? std::nullopt : parameter_cap(k, term.coordinate);
  if ((!bound && !cap) || (bound && *bound >= kMostCoordinate)) {
    if (splits(k, term.coordinate)) { // its parts, each a term of its own
      std::vector<OuterDim> parts;
      std::string why_not;
      if (collect_terms(k, term.coordinate, term.stride, parts, why_not)) {
        terms.insert(terms.end(), parts.begin(), parts.end());
        return true;
      }
    }
    why = fmt::format(
        "the coordinate at {} of a term of the base may exceed the 32 bits a TMA coordinate holds "
        "(its bound is not known in the kernel; where it is at most an integer parameter P, writing min(x, P) "
        "caps it, and the map's dim is P + 1 long)",
        where(k, term.coordinate));
    return false;
  }
  auto nonneg = nonneg_conditions(k, term.coordinate);
  if (!nonneg) {
    why = fmt::format(
        "the coordinate at {} of a term of the base may be negative (it is not built from program "
        "ids, constants and parameters by operations that keep a sign); a tensor map would fill "
        "with zeros what the pointer arithmetic reads before the base",
        where(k, term.coordinate));
    return false;
  }
  if (bound)
    term.extent = *bound + 1;
  else
    term.extent_param = *cap;
  term.nonneg_params = std::move(*nonneg);
  terms.push_back(term);
  return true;
}

} // namespace

std::optional<LaunchScalar> launch_scalar(const Kernel& k, ValueId v) {
  const ValueInfo& info = k.info(v);
  if (info.param_index >= 0)
    return LaunchScalar::of_param(info.param_index);
  if (!info.def)
    return std::nullopt;
  if (info.def->kind == OpKind::Constant) {
    if (auto c = info.def->exact_int())
      return LaunchScalar::of_constant(*c);
    return std::nullopt;
  }
  if (is_widening_int_cast(k, *info.def))
    return launch_scalar(k, info.def->operands[0]);
  return std::nullopt;
}

std::optional<BlockBase> decompose_block_base(const Kernel& k, ValueId base, std::string& why) {
  BlockBase b;
  std::vector<ValueId> offsets;
  ValueId v = base;
  // Through pointer additions to the parameter: base = ((p + o1) + o2) ...
  while (k.info(v).param_index < 0) {
    const Op* def = k.info(v).def;
    if (!def || def->kind != OpKind::AddPtr || !k.type(v).shape.empty()) {
      why = fmt::format("the base ({}) is {}, not a pointer parameter plus offsets", where(k, v),
                        def ? fmt::format("a {}", op_name(def->kind)) : "not built in the kernel");
      return std::nullopt;
    }
    offsets.push_back(def->operands[1]);
    v = def->operands[0];
  }
  b.param = k.info(v).param_index;
  for (auto it = offsets.rbegin(); it != offsets.rend(); ++it)
    if (!collect_terms(k, *it, LaunchScalar::of_constant(1), b.terms, why))
      return std::nullopt;
  return b;
}

namespace {
// >= 0 with no condition on the launch's arguments.
bool is_nonnegative(const Kernel& k, ValueId v) {
  const auto conditions = nonneg_conditions(k, v);
  return conditions && conditions->empty();
}
} // namespace

std::optional<int64_t> magnitude_bound(const Kernel& k, ValueId v) {
  const ValueInfo& info = k.info(v);
  const Op* def = info.def;
  if (!def || !info.type.shape.empty() || !is_int(info.type.elem))
    return std::nullopt; // parameters (any value), loop variables, tiles, floats
  switch (def->kind) {
  case OpKind::Constant:
    if (auto c = def->exact_int(); c && *c != std::numeric_limits<int64_t>::min())
      return bounded(std::llabs(*c));
    return std::nullopt;
  case OpKind::ProgramId: // every launch's grid is within CUDA's limits (check_grid)
    return (def->axis == 0 ? kMaxGridX : kMaxGridYZ) - 1;
  case OpKind::NumPrograms:
    return def->axis == 0 ? kMaxGridX : kMaxGridYZ;
  case OpKind::Cast: // narrowing may wrap
    return is_widening_int_cast(k, *def) ? magnitude_bound(k, def->operands[0]) : std::nullopt;
  case OpKind::Unary:
    if (def->unary == UnaryOp::Neg || def->unary == UnaryOp::Abs)
      return magnitude_bound(k, def->operands[0]);
    return std::nullopt;
  case OpKind::Binary: {
    auto a = magnitude_bound(k, def->operands[0]);
    switch (def->binary) {
    case BinaryOp::Div: // |a / b| <= |a| and |a % b| <= |a| for any b != 0 (truncating division)
    case BinaryOp::Rem:
      return a;
    default:
      break;
    }
    auto b = magnitude_bound(k, def->operands[1]);
    if (def->binary == BinaryOp::Min && (a || b) && is_nonnegative(k, def->operands[0]) &&
        is_nonnegative(k, def->operands[1])) // 0 <= min(a, b) <= either
      return a && b ? std::min(*a, *b) : a ? *a : *b;
    if (!a || !b)
      return std::nullopt;
    switch (def->binary) {
    case BinaryOp::Add:
    case BinaryOp::Sub:
      return bounded(static_cast<__int128>(*a) + *b);
    case BinaryOp::Mul:
      return bounded(static_cast<__int128>(*a) * *b);
    case BinaryOp::Min:
    case BinaryOp::Max:
      return std::max(*a, *b);
    default:
      return std::nullopt;
    }
  }
  default:
    return std::nullopt;
  }
}

namespace {

std::optional<std::vector<int>> merged(std::optional<std::vector<int>> a,
                                       const std::optional<std::vector<int>>& b) {
  if (!a || !b)
    return std::nullopt;
  a->insert(a->end(), b->begin(), b->end());
  std::sort(a->begin(), a->end());
  a->erase(std::unique(a->begin(), a->end()), a->end());
  return a;
}

} // namespace

std::optional<std::vector<int>> nonneg_conditions(const Kernel& k, ValueId v) {
  const ValueInfo& info = k.info(v);
  if (!info.type.shape.empty() || !is_int(info.type.elem) || info.type.elem == DType::i1)
    return std::nullopt;
  if (info.param_index >= 0)
    return std::vector<int>{info.param_index};
  const Op* def = info.def;
  if (!def) {
    // A for loop's induction variable: >= 0 in every iteration when it starts >= 0 and its step is a positive
    // constant (it only grows, and is taken not to wrap: block_base.h). Other region arguments: not known.
    const Op* loop = loop_of_induction_variable(k, v);
    if (!loop)
      return std::nullopt;
    const Op* step = k.info(loop->operands[2]).def;
    const std::optional<int64_t> step_value =
        step && step->kind == OpKind::Constant ? step->exact_int() : std::optional<int64_t>{};
    if (!step_value || *step_value <= 0)
      return std::nullopt;
    return nonneg_conditions(k, loop->operands[0]);
  }
  switch (def->kind) {
  case OpKind::Constant:
    if (auto c = def->exact_int(); c && *c >= 0)
      return std::vector<int>{};
    return std::nullopt;
  case OpKind::ProgramId:
  case OpKind::NumPrograms:
    return std::vector<int>{};
  case OpKind::Cast: // narrowing may wrap to a negative value
    return is_widening_int_cast(k, *def) ? nonneg_conditions(k, def->operands[0]) : std::nullopt;
  case OpKind::Unary: // |x| of a bounded coordinate (magnitude_bound), never the most negative integer
    return def->unary == UnaryOp::Abs ? std::optional<std::vector<int>>(std::vector<int>{}) : std::nullopt;
  case OpKind::Binary: {
    auto a = nonneg_conditions(k, def->operands[0]);
    switch (def->binary) {
    case BinaryOp::Rem: // truncating: the sign of the dividend
      return a;
    case BinaryOp::Add:
    case BinaryOp::Mul:
    case BinaryOp::Div: // by zero the kernel is wrong on either path
    case BinaryOp::Min:
      return merged(a, nonneg_conditions(k, def->operands[1]));
    case BinaryOp::Max: { // either side >= 0 will do: the one that needs fewer conditions
      auto b = nonneg_conditions(k, def->operands[1]);
      if (!a || (b && b->size() < a->size()))
        return b;
      return a;
    }
    default:
      return std::nullopt;
    }
  }
  default:
    return std::nullopt;
  }
}

} // namespace kiln
