// Tensor maps encoded by the real driver for real device allocations (runtime/tensor_map.h): every spec that
// kiln's rules call legal, including those at the rules' limits, must be accepted, so that kiln's rules are
// never looser than the driver's. Skipped, with the reason printed, without a driver or on a GPU older than
// Hopper (tensor maps need compute capability 9.0).
#include "gpu/gpu_skip.h"
#include "runtime/device.h"
#include "runtime/tensor_map.h"
#include "runtime/tensor_map_cache.h"
#include "support/error.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>

namespace kiln::rt {
namespace {

#define KILN_REQUIRE_TENSOR_MAPS()                                                                           \
  do {                                                                                                       \
    KILN_REQUIRE_GPU();                                                                                      \
    const DeviceInfo& device_ = current_device();                                                            \
    if (device_.cc_major < 9)                                                                                \
      GTEST_SKIP() << "tensor maps need compute capability 9.0 or newer; " << device_.name << " is "         \
                   << device_.arch;                                                                          \
    if (driver().cuTensorMapEncodeTiled == nullptr)                                                          \
      GTEST_SKIP() << "the CUDA driver (version " << driver().version << ") has no cuTensorMapEncodeTiled";  \
  } while (0)

bool all_zero(const CUtensorMap& map) {
  return std::all_of(std::begin(map.opaque), std::end(map.opaque), [](uint64_t w) { return w == 0; });
}

// A row-major rows x cols f16 matrix in `buffer`, read in 128 x 64 blocks with the 128-byte swizzle.
BlockPointerGeometry row_major_f16(const DeviceBuffer& buffer, int64_t rows, int64_t cols) {
  BlockPointerGeometry g;
  g.element = TensorMapElement::f16;
  g.base_address = buffer.ptr();
  g.shape = {rows, cols};
  g.strides = {cols, 1};
  g.block_shape = {128, 64};
  g.order = {1, 0};
  return g;
}

TEST(TensorMapGpu, EncodesAMatrixInDeviceMemory) {
  KILN_REQUIRE_TENSOR_MAPS();
  DeviceBuffer buffer(4096 * 1024 * 2);
  TensorMapSpec spec = tensor_map_spec_for_block_pointer(row_major_f16(buffer, 4096, 1024),
                                                         TensorMapSwizzle::span128, TensorMapOobFill::zero);
  ASSERT_TRUE(is_legal(spec)) << describe(spec);
  CUtensorMap map = encode_tensor_map(spec);
  EXPECT_FALSE(all_zero(map)) << "the driver returned success but wrote nothing: " << describe(spec);
}

TEST(TensorMapGpu, EncodesTheSameBytesTwice) {
  KILN_REQUIRE_TENSOR_MAPS();
  DeviceBuffer buffer(1024 * 512 * 2);
  TensorMapSpec spec = tensor_map_spec_for_block_pointer(row_major_f16(buffer, 1024, 512),
                                                         TensorMapSwizzle::span128, TensorMapOobFill::zero);
  CUtensorMap first = encode_tensor_map(spec);
  CUtensorMap second = encode_tensor_map(spec);
  EXPECT_EQ(std::memcmp(&first, &second, sizeof(CUtensorMap)), 0)
      << "the cache relies on a map being a pure function of its spec";
}

TEST(TensorMapGpu, TheCacheEncodesOnceThroughTheDriver) {
  KILN_REQUIRE_TENSOR_MAPS();
  DeviceBuffer buffer(1024 * 512 * 2);
  TensorMapSpec spec = tensor_map_spec_for_block_pointer(row_major_f16(buffer, 1024, 512),
                                                         TensorMapSwizzle::span64, TensorMapOobFill::zero);
  spec.box_dims[0] = 32; // 64 bytes: the 64-byte span
  TensorMapCache cache(4);
  CUtensorMap first = cache.get(spec);
  CUtensorMap again = cache.get(spec);
  EXPECT_EQ(std::memcmp(&first, &again, sizeof(CUtensorMap)), 0);
  EXPECT_EQ(cache.stats().misses, 1u);
  EXPECT_EQ(cache.stats().hits, 1u);
  EXPECT_FALSE(all_zero(first));
}

// Specs at the limits of kiln's rules, each of which the driver must accept.
TEST(TensorMapGpu, LegalSpecsAtTheLimitsAreAccepted) {
  KILN_REQUIRE_TENSOR_MAPS();
  DeviceBuffer buffer(8 << 20);
  std::vector<TensorMapSpec> specs;
  auto base = [&] {
    TensorMapSpec s;
    s.element = TensorMapElement::f16;
    s.global_address = buffer.ptr();
    s.global_dims = {64, 256};
    s.global_strides_bytes = {2, 128};
    s.box_dims = {64, 64};
    s.element_strides = {1, 1};
    return s;
  };
  for (TensorMapElement e :
       {TensorMapElement::u8, TensorMapElement::i32, TensorMapElement::i64, TensorMapElement::f16,
        TensorMapElement::bf16, TensorMapElement::f32, TensorMapElement::f64}) {
    TensorMapSpec s = base(); // every element type, its rows 16 elements wide
    s.element = e;
    s.global_strides_bytes = {tensor_map_element_bytes(e), 16 * tensor_map_element_bytes(e) * 4};
    s.global_dims = {16, 64};
    s.box_dims = {16, 64};
    specs.push_back(s);
  }
  for (TensorMapSwizzle sw :
       {TensorMapSwizzle::span32, TensorMapSwizzle::span64, TensorMapSwizzle::span128}) {
    TensorMapSpec s = base(); // each swizzle with the box's row exactly as wide as its span
    s.swizzle = sw;
    s.box_dims[0] = swizzle_span_bytes(sw) / 2;
    specs.push_back(s);
  }
  {
    TensorMapSpec s = base(); // the narrowest row (16 bytes), the tallest box (256), an address 16 past 32
    s.global_address = buffer.ptr() + 16;
    s.box_dims = {8, 256};
    specs.push_back(s);
  }
  {
    TensorMapSpec s = base(); // rank 5, dims of one element, element strides up to 8
    s.global_dims = {64, 8, 1, 2, 1};
    s.global_strides_bytes = {2, 128, 1024, 1024, 2048};
    s.box_dims = {64, 8, 1, 2, 1};
    s.element_strides = {1, 8, 1, 2, 1};
    specs.push_back(s);
  }
  {
    TensorMapSpec s = base(); // rank 1, NaN fill, L2 promotion
    s.global_dims = {4096};
    s.global_strides_bytes = {2};
    s.box_dims = {256};
    s.element_strides = {1};
    s.oob_fill = TensorMapOobFill::nan_request_zero_fma;
    s.l2_promotion = TensorMapL2Promotion::bytes256;
    specs.push_back(s);
  }
  for (const TensorMapSpec& s : specs) {
    ASSERT_TRUE(is_legal(s)) << describe(s);
    EXPECT_NO_THROW(encode_tensor_map(s)) << describe(s);
  }
}

} // namespace
} // namespace kiln::rt
