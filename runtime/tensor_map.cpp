// Tensor-map specs: built from block pointers, checked against cuTensorMapEncodeTiled's rules, described,
// and encoded through the driver.
//
// The rules are those the CUDA Driver API reference lists for cuTensorMapEncodeTiled (section "Tensor Map
// Object Managment", docs.nvidia.com/cuda/cuda-driver-api/group__CUDA__TENSOR__MEMORY.html). Checking them
// here, rather than letting the driver refuse, gives the reason in kiln's words and lets the code generator
// choose the cp.async path before any launch.
#include "runtime/tensor_map.h"

#include "support/error.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstdint>

namespace kiln::rt {

namespace {

constexpr int kMaxRank = 5;
constexpr int64_t kMaxGlobalDim = int64_t{1} << 32; // dims are in [1, 2^32]
constexpr int64_t kStrideLimit = int64_t{1} << 40;  // strides are below 2^40 bytes
constexpr int64_t kMaxBoxDim = 256;                 // box dims are in [1, 256]
constexpr int64_t kMaxElementStride = 8;            // element strides are in [1, 8]
// TMA moves 16-byte chunks: the alignment of the address, of the strides and of the box's rows.
constexpr int64_t kChunkBytes = 16;

// "dim 1", or "dim 1 (block-pointer dim 0)" when the spec records where the dim came from.
std::string dim_name(const TensorMapSpec& spec, int dim) {
  if (dim < static_cast<int>(spec.source_dims.size()))
    return fmt::format("dim {} (block-pointer dim {})", dim, spec.source_dims[dim]);
  return fmt::format("dim {}", dim);
}

// The alignment the address and the outer strides need: 32 bytes with 32-byte interleave, else 16.
int64_t required_alignment(const TensorMapSpec& spec) {
  return spec.interleave == TensorMapInterleave::chunk32 ? 32 : kChunkBytes;
}

// Problems that make the per-dim checks meaningless: a rank out of range or vectors of different lengths.
void check_shape_of_spec(const TensorMapSpec& spec, std::vector<std::string>& problems) {
  int rank = spec.rank();
  if (rank < 1 || rank > kMaxRank)
    problems.push_back(fmt::format("rank {}: a tensor map has 1 to {} dims", rank, kMaxRank));
  auto same_length = [&](size_t size, std::string_view what) {
    if (static_cast<int>(size) != rank)
      problems.push_back(fmt::format("{} has {} {} but the tensor has {} dims", what, size,
                                     size == 1 ? "entry" : "entries", rank));
  };
  same_length(spec.global_strides_bytes.size(), "global_strides_bytes");
  same_length(spec.box_dims.size(), "box_dims");
  same_length(spec.element_strides.size(), "element_strides");
  if (!spec.source_dims.empty())
    same_length(spec.source_dims.size(), "source_dims");
}

void check_address(const TensorMapSpec& spec, std::vector<std::string>& problems) {
  if (spec.global_address == 0) {
    problems.push_back("the global address is null");
    return;
  }
  int64_t alignment = required_alignment(spec);
  if (spec.global_address % static_cast<uint64_t>(alignment) != 0)
    problems.push_back(
        fmt::format("global address {:#x} is not {}-byte aligned", spec.global_address, alignment));
}

void check_dims(const TensorMapSpec& spec, std::vector<std::string>& problems) {
  for (int d = 0; d < spec.rank(); ++d) {
    int64_t n = spec.global_dims[d];
    if (n < 1 || n > kMaxGlobalDim)
      problems.push_back(fmt::format("{} is {} elements, must be in [1, 2^32]", dim_name(spec, d), n));
  }
}

void check_strides(const TensorMapSpec& spec, std::vector<std::string>& problems) {
  int64_t element_bytes = tensor_map_element_bytes(spec.element);
  // TMA has no stride for dim 0: it reads that dim's elements back to back.
  if (spec.global_strides_bytes[0] != element_bytes)
    problems.push_back(
        fmt::format("{} has a stride of {} bytes; the innermost dim must be contiguous (a stride "
                    "of one {}, {} bytes)",
                    dim_name(spec, 0), spec.global_strides_bytes[0], tensor_map_element_name(spec.element),
                    element_bytes));
  int64_t alignment = required_alignment(spec);
  for (int d = 1; d < spec.rank(); ++d) {
    int64_t stride = spec.global_strides_bytes[d];
    // The driver takes strides as unsigned byte counts, so a negative one cannot be said. A zero stride (a
    // broadcast dim) is no layout the reference describes: such tensors keep the cp.async path rather than
    // rely on whatever the driver happens to accept.
    if (stride <= 0)
      problems.push_back(
          fmt::format("stride of {} is {} bytes, must be positive", dim_name(spec, d), stride));
    else if (stride % alignment != 0)
      problems.push_back(fmt::format("stride of {} is {} bytes, not a multiple of {}", dim_name(spec, d),
                                     stride, alignment));
    else if (stride >= kStrideLimit)
      problems.push_back(
          fmt::format("stride of {} is {} bytes, must be below 2^40", dim_name(spec, d), stride));
  }
}

void check_box(const TensorMapSpec& spec, std::vector<std::string>& problems) {
  bool box_dims_in_range = true;
  for (int d = 0; d < spec.rank(); ++d) {
    int64_t n = spec.box_dims[d];
    if (n < 1 || n > kMaxBoxDim) {
      problems.push_back(
          fmt::format("box {} is {} elements, must be in [1, {}]", dim_name(spec, d), n, kMaxBoxDim));
      box_dims_in_range = false;
    }
  }
  if (!box_dims_in_range || spec.interleave != TensorMapInterleave::none)
    return; // the inner-row rules below are for non-interleaved maps; a bad box dim was already reported
  int64_t element_bytes = tensor_map_element_bytes(spec.element);
  int64_t row_bytes = spec.box_dims[0] * element_bytes;
  if (row_bytes % kChunkBytes != 0)
    problems.push_back(fmt::format("the box's inner dim is {} x {} = {} bytes, not a multiple of 16",
                                   spec.box_dims[0], element_bytes, row_bytes));
  int span = swizzle_span_bytes(spec.swizzle);
  if (span != 0 && row_bytes > span)
    problems.push_back(
        fmt::format("the box's inner dim is {} bytes, wider than the {}-byte swizzle span", row_bytes, span));
}

void check_element_strides(const TensorMapSpec& spec, std::vector<std::string>& problems) {
  for (int d = 0; d < spec.rank(); ++d) {
    int64_t s = spec.element_strides[d];
    if (s < 1 || s > kMaxElementStride)
      problems.push_back(fmt::format("element stride of {} is {}, must be in [1, {}]", dim_name(spec, d), s,
                                     kMaxElementStride));
  }
}

void check_modes(const TensorMapSpec& spec, std::vector<std::string>& problems) {
  if (spec.interleave != TensorMapInterleave::none && spec.rank() < 3)
    problems.push_back(fmt::format("{} interleave needs rank 3 or more, the tensor has {}",
                                   tensor_map_interleave_name(spec.interleave), spec.rank()));
  if (spec.interleave == TensorMapInterleave::chunk32 && spec.swizzle != TensorMapSwizzle::span32)
    problems.push_back(
        fmt::format("32B interleave needs the 32B swizzle, not {}", tensor_map_swizzle_name(spec.swizzle)));
  if (spec.oob_fill == TensorMapOobFill::nan_request_zero_fma && !is_floating_point(spec.element))
    problems.push_back(fmt::format("the NaN out-of-bounds fill needs a floating-point element type, not {}",
                                   tensor_map_element_name(spec.element)));
}

int driver_data_type(TensorMapElement element) {
  switch (element) {
  case TensorMapElement::u8:
    return cu::kTensorMapDataTypeUint8;
  case TensorMapElement::i32:
    return cu::kTensorMapDataTypeInt32;
  case TensorMapElement::i64:
    return cu::kTensorMapDataTypeInt64;
  case TensorMapElement::f16:
    return cu::kTensorMapDataTypeFloat16;
  case TensorMapElement::bf16:
    return cu::kTensorMapDataTypeBfloat16;
  case TensorMapElement::f32:
    return cu::kTensorMapDataTypeFloat32;
  case TensorMapElement::f64:
    return cu::kTensorMapDataTypeFloat64;
  }
  throw InternalError(fmt::format("unknown TensorMapElement {}", static_cast<int>(element)));
}

int driver_swizzle(TensorMapSwizzle swizzle) {
  switch (swizzle) {
  case TensorMapSwizzle::none:
    return cu::kTensorMapSwizzleNone;
  case TensorMapSwizzle::span32:
    return cu::kTensorMapSwizzle32B;
  case TensorMapSwizzle::span64:
    return cu::kTensorMapSwizzle64B;
  case TensorMapSwizzle::span128:
    return cu::kTensorMapSwizzle128B;
  }
  throw InternalError(fmt::format("unknown TensorMapSwizzle {}", static_cast<int>(swizzle)));
}

int driver_interleave(TensorMapInterleave interleave) {
  switch (interleave) {
  case TensorMapInterleave::none:
    return cu::kTensorMapInterleaveNone;
  case TensorMapInterleave::chunk16:
    return cu::kTensorMapInterleave16B;
  case TensorMapInterleave::chunk32:
    return cu::kTensorMapInterleave32B;
  }
  throw InternalError(fmt::format("unknown TensorMapInterleave {}", static_cast<int>(interleave)));
}

int driver_l2_promotion(TensorMapL2Promotion promotion) {
  switch (promotion) {
  case TensorMapL2Promotion::none:
    return cu::kTensorMapL2PromotionNone;
  case TensorMapL2Promotion::bytes64:
    return cu::kTensorMapL2Promotion64B;
  case TensorMapL2Promotion::bytes128:
    return cu::kTensorMapL2Promotion128B;
  case TensorMapL2Promotion::bytes256:
    return cu::kTensorMapL2Promotion256B;
  }
  throw InternalError(fmt::format("unknown TensorMapL2Promotion {}", static_cast<int>(promotion)));
}

int driver_oob_fill(TensorMapOobFill fill) {
  switch (fill) {
  case TensorMapOobFill::zero:
    return cu::kTensorMapFloatOobFillNone;
  case TensorMapOobFill::nan_request_zero_fma:
    return cu::kTensorMapFloatOobFillNanRequestZeroFma;
  }
  throw InternalError(fmt::format("unknown TensorMapOobFill {}", static_cast<int>(fill)));
}

// "[1, 2, 3]"
template <typename T> std::string list(const std::vector<T>& values) {
  return fmt::format("[{}]", fmt::join(values, ", "));
}

} // namespace

std::string_view tensor_map_element_name(TensorMapElement element) {
  switch (element) {
  case TensorMapElement::u8:
    return "u8";
  case TensorMapElement::i32:
    return "i32";
  case TensorMapElement::i64:
    return "i64";
  case TensorMapElement::f16:
    return "f16";
  case TensorMapElement::bf16:
    return "bf16";
  case TensorMapElement::f32:
    return "f32";
  case TensorMapElement::f64:
    return "f64";
  }
  return "unknown element type";
}

int tensor_map_element_bytes(TensorMapElement element) {
  switch (element) {
  case TensorMapElement::u8:
    return 1;
  case TensorMapElement::f16:
  case TensorMapElement::bf16:
    return 2;
  case TensorMapElement::i32:
  case TensorMapElement::f32:
    return 4;
  case TensorMapElement::i64:
  case TensorMapElement::f64:
    return 8;
  }
  throw InternalError(fmt::format("unknown TensorMapElement {}", static_cast<int>(element)));
}

bool is_floating_point(TensorMapElement element) {
  return element == TensorMapElement::f16 || element == TensorMapElement::bf16 ||
         element == TensorMapElement::f32 || element == TensorMapElement::f64;
}

std::string_view tensor_map_swizzle_name(TensorMapSwizzle swizzle) {
  switch (swizzle) {
  case TensorMapSwizzle::none:
    return "none";
  case TensorMapSwizzle::span32:
    return "32B";
  case TensorMapSwizzle::span64:
    return "64B";
  case TensorMapSwizzle::span128:
    return "128B";
  }
  return "unknown swizzle";
}

int swizzle_span_bytes(TensorMapSwizzle swizzle) {
  switch (swizzle) {
  case TensorMapSwizzle::none:
    return 0;
  case TensorMapSwizzle::span32:
    return 32;
  case TensorMapSwizzle::span64:
    return 64;
  case TensorMapSwizzle::span128:
    return 128;
  }
  throw InternalError(fmt::format("unknown TensorMapSwizzle {}", static_cast<int>(swizzle)));
}

std::string_view tensor_map_interleave_name(TensorMapInterleave interleave) {
  switch (interleave) {
  case TensorMapInterleave::none:
    return "none";
  case TensorMapInterleave::chunk16:
    return "16B";
  case TensorMapInterleave::chunk32:
    return "32B";
  }
  return "unknown interleave";
}

std::string_view tensor_map_l2_promotion_name(TensorMapL2Promotion promotion) {
  switch (promotion) {
  case TensorMapL2Promotion::none:
    return "none";
  case TensorMapL2Promotion::bytes64:
    return "64B";
  case TensorMapL2Promotion::bytes128:
    return "128B";
  case TensorMapL2Promotion::bytes256:
    return "256B";
  }
  return "unknown L2 promotion";
}

std::string_view tensor_map_oob_fill_name(TensorMapOobFill fill) {
  switch (fill) {
  case TensorMapOobFill::zero:
    return "zero";
  case TensorMapOobFill::nan_request_zero_fma:
    return "NaN (zero in FMAs)";
  }
  return "unknown fill";
}

TensorMapSpec tensor_map_spec_for_block_pointer(const BlockPointerGeometry& geometry,
                                                TensorMapSwizzle swizzle, TensorMapOobFill oob_fill,
                                                TensorMapL2Promotion l2_promotion) {
  size_t rank = geometry.shape.size();
  if (rank == 0)
    fail("a block pointer for a tensor map needs at least one dim; its shape is empty");
  auto require_rank = [&](size_t size, std::string_view what) {
    if (size != rank)
      fail("a block pointer's {} must have one entry per dim: expected {} (the shape's), got {}", what, rank,
           size);
  };
  require_rank(geometry.strides.size(), "strides");
  require_rank(geometry.block_shape.size(), "block shape");
  require_rank(geometry.order.size(), "order");
  std::vector<bool> seen(rank, false);
  for (int dim : geometry.order) {
    if (dim < 0 || static_cast<size_t>(dim) >= rank || seen[dim])
      fail("a block pointer's order must be a permutation of its dims 0..{}, got {}", rank - 1,
           list(geometry.order));
    seen[dim] = true;
  }

  int64_t element_bytes = tensor_map_element_bytes(geometry.element);
  TensorMapSpec spec;
  spec.element = geometry.element;
  spec.global_address = geometry.base_address;
  spec.interleave = TensorMapInterleave::none;
  spec.swizzle = swizzle;
  spec.l2_promotion = l2_promotion;
  spec.oob_fill = oob_fill;
  for (int dim : geometry.order) { // fastest-varying first, which is TMA's innermost-first
    int64_t stride_bytes = 0;
    if (__builtin_mul_overflow(geometry.strides[dim], element_bytes, &stride_bytes))
      fail("a block pointer's stride of dim {} is {} elements of {} bytes, which overflows 64 bits", dim,
           geometry.strides[dim], element_bytes);
    spec.global_dims.push_back(geometry.shape[dim]);
    spec.global_strides_bytes.push_back(stride_bytes);
    spec.box_dims.push_back(geometry.block_shape[dim]);
    spec.element_strides.push_back(1);
    spec.source_dims.push_back(dim);
  }
  return spec;
}

std::vector<std::string> tensor_map_problems(const TensorMapSpec& spec) {
  std::vector<std::string> problems;
  check_shape_of_spec(spec, problems);
  if (!problems.empty())
    return problems; // the per-dim rules index vectors that do not line up
  check_address(spec, problems);
  check_dims(spec, problems);
  check_strides(spec, problems);
  check_box(spec, problems);
  check_element_strides(spec, problems);
  check_modes(spec, problems);
  return problems;
}

std::string describe(const TensorMapSpec& spec) {
  std::string text =
      fmt::format("tensor map of {} at {:#x}: dims {} innermost first", tensor_map_element_name(spec.element),
                  spec.global_address, list(spec.global_dims));
  if (!spec.source_dims.empty())
    text += fmt::format(" (block-pointer dims {})", list(spec.source_dims));
  text += fmt::format(
      ", strides {} bytes, box {}, element strides {}, swizzle {}, interleave {}, L2 promotion {}, "
      "out-of-bounds fill {}",
      list(spec.global_strides_bytes), list(spec.box_dims), list(spec.element_strides),
      tensor_map_swizzle_name(spec.swizzle), tensor_map_interleave_name(spec.interleave),
      tensor_map_l2_promotion_name(spec.l2_promotion), tensor_map_oob_fill_name(spec.oob_fill));
  std::vector<std::string> problems = tensor_map_problems(spec);
  if (problems.empty())
    return text + ": legal";
  return text + fmt::format(": not legal: {}", fmt::join(problems, "; "));
}

CUtensorMap encode_tensor_map(const TensorMapSpec& spec) {
  if (!is_legal(spec))
    fail("cannot encode a tensor map that breaks the driver's rules: {}", describe(spec));
  std::string why;
  if (!driver_available(&why))
    fail("encoding a tensor map needs the CUDA driver, and there is none usable: {}", why);
  Driver& d = driver();
  if (d.cuTensorMapEncodeTiled == nullptr)
    fail("the CUDA driver {} (version {}) has no cuTensorMapEncodeTiled: tensor maps need a driver for CUDA "
         "12.0 "
         "or newer; wanted {}",
         d.library, d.version, describe(spec));

  // The driver's arrays: dims and box for every dim, strides for dims 1 and up (dim 0 is contiguous).
  int rank = spec.rank();
  uint64_t global_dims[kMaxRank] = {};
  uint64_t global_strides[kMaxRank] = {};
  uint32_t box_dims[kMaxRank] = {};
  uint32_t element_strides[kMaxRank] = {};
  for (int dim = 0; dim < rank; ++dim) { // the legality check bounds every value below
    global_dims[dim] = static_cast<uint64_t>(spec.global_dims[dim]);
    box_dims[dim] = static_cast<uint32_t>(spec.box_dims[dim]);
    element_strides[dim] = static_cast<uint32_t>(spec.element_strides[dim]);
    if (dim > 0)
      global_strides[dim - 1] = static_cast<uint64_t>(spec.global_strides_bytes[dim]);
  }
  CUtensorMap map{};
  void* global_address = reinterpret_cast<void*>(static_cast<uintptr_t>(spec.global_address));
  CUresult result = d.cuTensorMapEncodeTiled(
      &map, driver_data_type(spec.element), static_cast<uint32_t>(rank), global_address, global_dims,
      global_strides, box_dims, element_strides, driver_interleave(spec.interleave),
      driver_swizzle(spec.swizzle), driver_l2_promotion(spec.l2_promotion), driver_oob_fill(spec.oob_fill));
  d.check(result, "cuTensorMapEncodeTiled", "encoding the " + describe(spec));
  return map;
}

} // namespace kiln::rt
