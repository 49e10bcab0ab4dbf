#include "jit/tensor_map_args.h"

#include "runtime/tensor_map.h"
#include "runtime/tensor_map_cache.h"
#include "support/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>

namespace kiln {

namespace {

rt::TensorMapElement element_of(DType t) {
  switch (t) {
  case DType::f16:
    return rt::TensorMapElement::f16;
  case DType::bf16:
    return rt::TensorMapElement::bf16;
  case DType::f32:
    return rt::TensorMapElement::f32;
  case DType::f64:
    return rt::TensorMapElement::f64;
  case DType::i32:
    return rt::TensorMapElement::i32;
  case DType::i64:
    return rt::TensorMapElement::i64;
  case DType::i1:
  case DType::u8:
    return rt::TensorMapElement::u8;
  }
  throw InternalError("tensor map of an unknown dtype");
}

rt::TensorMapSwizzle swizzle_of(SwizzleMode m) {
  switch (m) {
  case SwizzleMode::Bytes128:
    return rt::TensorMapSwizzle::span128;
  case SwizzleMode::Bytes64:
    return rt::TensorMapSwizzle::span64;
  case SwizzleMode::Bytes32:
    return rt::TensorMapSwizzle::span32;
  case SwizzleMode::None:
    break;
  }
  return rt::TensorMapSwizzle::none;
}

int64_t int_arg(int param, const std::vector<LaunchArg>& args) {
  const LaunchArg& a = args.at(static_cast<size_t>(param));
  if (a.kind != LaunchArg::Kind::Int)
    throw InternalError("a tensor map's shape or stride is not an integer argument");
  return a.i;
}

// The value of `s` for these arguments; nullopt where a product of factors overflows 64 bits.
std::optional<int64_t> value_of(const LaunchScalar& s, const std::vector<LaunchArg>& args) {
  int64_t v = s.constant;
  for (int p : s.params)
    if (__builtin_mul_overflow(v, int_arg(p, args), &v))
      return std::nullopt;
  return v;
}

} // namespace

rt::TensorMapSpec tensor_map_spec(const TensorMapParam& m, const std::vector<Param>& params,
                                  const std::vector<LaunchArg>& args) {
  if (args.size() != params.size() || m.base_param < 0 || static_cast<size_t>(m.base_param) >= args.size())
    throw InternalError("tensor map arguments do not match the kernel's parameters");
  const LaunchArg& base = args[static_cast<size_t>(m.base_param)];
  if (base.kind != LaunchArg::Kind::Pointer)
    throw InternalError(fmt::format("the base of a tensor map, '{}', is not a pointer argument",
                                    params[static_cast<size_t>(m.base_param)].name));
  rt::BlockPointerGeometry g;
  g.element = element_of(m.dtype);
  g.base_address = base.ptr;
  // A product past 64 bits (a stride of factors) is no tensor the launch can describe: -1, which the map's checks
  // refuse.
  auto value = [&](const LaunchScalar& s) { return value_of(s, args).value_or(-1); };
  for (size_t d = 0; d < m.shape.size(); ++d) {
    g.shape.push_back(value(m.shape[d]));
    g.strides.push_back(value(m.strides[d]));
  }
  g.block_shape = m.box;
  g.order = m.order;
  // The per-program terms of the base: dims outside the block's, one element of each per copy.
  for (const OuterDim& o : m.outer) {
    g.order.push_back(static_cast<int>(g.shape.size()));
    // A coordinate capped by a parameter, min(x, P), is at most P: the dim holds P + 1 (codegen/block_base.h).
    g.shape.push_back(o.extent_param >= 0 ? int_arg(o.extent_param, args) + 1 : o.extent);
    g.strides.push_back(value(o.stride));
    g.block_shape.push_back(1);
  }
  return rt::tensor_map_spec_for_block_pointer(g, swizzle_of(m.swizzle), rt::TensorMapOobFill::zero);
}

TensorMapArgs tensor_map_args(const std::vector<TensorMapParam>& maps, const std::vector<Param>& params,
                              const std::vector<LaunchArg>& args) {
  TensorMapArgs out;
  out.maps.resize(maps.size());
  if (maps.empty())
    return out;
  std::vector<rt::TensorMapSpec> specs;
  for (size_t i = 0; i < maps.size(); ++i) {
    specs.push_back(tensor_map_spec(maps[i], params, args));
    // Only a per-program term's stride is a product of arguments (codegen/block_base.h); past 64 bits its spec
    // holds -1, which is the reason to give rather than the spec's problems.
    const bool overflows = std::any_of(maps[i].outer.begin(), maps[i].outer.end(),
                                       [&](const OuterDim& o) { return !value_of(o.stride, args); });
    std::vector<std::string> problems =
        overflows ? std::vector<std::string>{"a stride that is a product of the arguments overflows 64 bits"}
                  : rt::tensor_map_problems(specs.back());
    // The kernel passes each copy's coordinates as 32-bit signed integers (the block pointer's offsets),
    // which cannot name elements of a dim longer than that: the driver's own limit (2^32) is not enough here.
    for (size_t d = 0; d < specs.back().global_dims.size(); ++d)
      if (specs.back().global_dims[d] > std::numeric_limits<int32_t>::max())
        problems.push_back(fmt::format("dim {} holds {} elements; TMA coordinates are 32-bit signed", d,
                                       specs.back().global_dims[d]));
    // A per-program coordinate is >= 0 only while these parameters are (codegen/block_base.h): a negative one
    // would be filled with zeros, where the kernel's pointer arithmetic reads before the base.
    for (const OuterDim& o : maps[i].outer)
      for (int param : o.nonneg_params)
        if (int64_t value = int_arg(param, args); value < 0)
          problems.push_back(
              fmt::format("'{}' is {}, so a per-program coordinate of the base may be negative",
                          params[static_cast<size_t>(param)].name, value));
    for (const std::string& p : problems)
      out.why_not += fmt::format("{}map {} (make_block_ptr at {}): {}", out.why_not.empty() ? "" : "; ", i,
                                 maps[i].source, p);
  }
  if (!out.why_not.empty())
    return out;
  if (!rt::driver_available() || rt::driver().cuTensorMapEncodeTiled == nullptr) {
    out.why_not = "the CUDA driver has no cuTensorMapEncodeTiled";
    return out;
  }
  for (size_t i = 0; i < maps.size(); ++i)
    out.maps[i] = rt::tensor_map_cache().get(specs[i]);
  out.use_tma = 1;
  return out;
}

} // namespace kiln
