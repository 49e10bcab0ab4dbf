// Tensor maps: the 128-byte descriptors through which Hopper's Tensor Memory Accelerator (TMA) copies a box
// of a global tensor into shared memory. Owns what kiln asks the driver to encode (TensorMapSpec), how a
// block pointer becomes one, the rules cuTensorMapEncodeTiled sets with the reason when a spec breaks one,
// the text that describes a spec, and the encoding itself. Reusing encoded maps is
// runtime/tensor_map_cache.h.
//
// A spec that breaks a rule is not an error: the code generator keeps its cp.async path for that launch and
// shows the reason (describe()). Only a malformed description, or asking the driver to encode an illegal
// spec, is a kiln::Error.
#pragma once

#include "runtime/cuda_driver.h"

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace kiln::rt {

// The element types a kiln tensor map carries: kiln's dtypes that TMA can copy (the driver knows more, such
// as u16, tf32 and packed 4-bit types, which no kiln tensor holds). kiln's i1 is a byte and maps to u8.
enum class TensorMapElement : uint8_t { u8, i32, i64, f16, bf16, f32, f64 };
std::string_view tensor_map_element_name(TensorMapElement element); // "f16"
int tensor_map_element_bytes(TensorMapElement element);             // f16 -> 2
bool is_floating_point(TensorMapElement element);

// How TMA permutes 16-byte chunks as it writes shared memory, so that reading the tile back (ldmatrix, wgmma)
// avoids bank conflicts. It must agree with the shared tile's layout, which the code generator owns.
enum class TensorMapSwizzle : uint8_t { none, span32, span64, span128 };
std::string_view tensor_map_swizzle_name(TensorMapSwizzle swizzle); // "128B"
int swizzle_span_bytes(TensorMapSwizzle swizzle);                   // 0 for none

// Interleaved layouts (NC/8HWC8 and the like) exist for convolutions; kiln's block pointers always use none.
// The others are here so that the rules they change are checked, not silently assumed away.
enum class TensorMapInterleave : uint8_t { none, chunk16, chunk32 };
std::string_view tensor_map_interleave_name(TensorMapInterleave interleave);

// The granularity at which L2 fills misses from DRAM for this map's copies.
enum class TensorMapL2Promotion : uint8_t { none, bytes64, bytes128, bytes256 };
std::string_view tensor_map_l2_promotion_name(TensorMapL2Promotion promotion);

// What the hardware writes for box elements outside the tensor: zero, or (floating-point elements only) a NaN
// that tensor-core FMAs read as zero. Either way boundary tiles need no bounds checks in the kernel.
enum class TensorMapOobFill : uint8_t { zero, nan_request_zero_fma };
std::string_view tensor_map_oob_fill_name(TensorMapOobFill fill);

// The parameters of one cuTensorMapEncodeTiled call, in kiln's words. Dims are listed innermost first, the
// order TMA uses: dim 0 is the contiguous one. Every per-dim vector has rank() entries.
struct TensorMapSpec {
  TensorMapElement element = TensorMapElement::f16;
  uint64_t global_address = 0;      // the tensor's first element (not the box's)
  std::vector<int64_t> global_dims; // elements per dim
  // Bytes between neighbours along each dim. The driver takes only [1..]: it reads dim 0 contiguously, so
  // [0] must be the element size; it is kept so that a block pointer whose fastest dim is strided can say so.
  std::vector<int64_t> global_strides_bytes;
  std::vector<int64_t> box_dims;        // elements copied per dim by one TMA copy (the block shape)
  std::vector<int64_t> element_strides; // 1 per dim: every element of the box is copied
  TensorMapInterleave interleave = TensorMapInterleave::none;
  TensorMapSwizzle swizzle = TensorMapSwizzle::none;
  TensorMapL2Promotion l2_promotion = TensorMapL2Promotion::none;
  TensorMapOobFill oob_fill = TensorMapOobFill::zero;
  // For messages only, not part of the map: the block-pointer dim each dim came from (empty when written by
  // hand), so that a reason can name the dim the user wrote.
  std::vector<int> source_dims;

  int rank() const { return static_cast<int>(global_dims.size()); }
};

// What a DSL block pointer says about its tensor, with the values of one launch: the dims in the block
// pointer's own order, and `order` listing them fastest-varying first (dsl/type.h). Offsets are not here:
// they are the coordinates of each copy, not part of the map.
struct BlockPointerGeometry {
  TensorMapElement element = TensorMapElement::f16;
  uint64_t base_address = 0;        // the block pointer's base: element (0, ..., 0) of the tensor
  std::vector<int64_t> shape;       // elements per dim
  std::vector<int64_t> strides;     // elements per dim
  std::vector<int64_t> block_shape; // elements per dim of the block: the box
  std::vector<int> order;           // a permutation of the dims, fastest-varying first
};

// The spec that copies `geometry`'s blocks: dims reordered by `order` (TMA's dim i is the block pointer's dim
// order[i]), strides turned into bytes, element strides 1. The result may be illegal; tensor_map_problems()
// says why. Throws kiln::Error when the geometry itself is malformed: no dims, vectors of different lengths,
// an order that is not a permutation of the dims, or a byte stride that does not fit in 64 bits.
TensorMapSpec
tensor_map_spec_for_block_pointer(const BlockPointerGeometry& geometry, TensorMapSwizzle swizzle,
                                  TensorMapOobFill oob_fill,
                                  TensorMapL2Promotion l2_promotion = TensorMapL2Promotion::none);

// Every rule of cuTensorMapEncodeTiled that `spec` breaks, one sentence each naming what was required and
// what came ("stride of dim 1 is 200 bytes, not a multiple of 16"); empty when the driver may encode it.
std::vector<std::string> tensor_map_problems(const TensorMapSpec& spec);
inline bool is_legal(const TensorMapSpec& spec) { return tensor_map_problems(spec).empty(); }

// One line: the spec's parameters, then "legal" or "not legal: <every problem>". For `--stage lowered`, dumps
// and error messages.
std::string describe(const TensorMapSpec& spec);

// The driver's encoding of `spec`. Throws kiln::Error, naming the spec, when it is illegal, when there is no
// CUDA driver, when the driver predates tensor maps (CUDA 12.0), or when the driver refuses it. Call it with
// the launch's context current: the driver lists CUDA_ERROR_INVALID_CONTEXT among its results.
CUtensorMap encode_tensor_map(const TensorMapSpec& spec);

} // namespace kiln::rt
