// A launch's tensor maps (jit/tensor_map_args.h): specs rebuilt from the kernel's arguments as the code
// generator described them, and the per-launch choice of the cp.async path when a map breaks a rule. None of
// this needs a GPU (without a driver, legal maps are refused for that reason).
#include "jit/tensor_map_args.h"
#include "runtime/tensor_map.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace kiln;

namespace {

constexpr uint64_t kBase = 0x7f0000000000;

// matmul's A: make_block_ptr(A, {M, K}, {stride_am, 1}, ..., {128, 32}, order {1, 0}).
const std::vector<Param> kParams = {{"A", 0}, {"M", 1}, {"K", 2}, {"stride_am", 3}};

TensorMapParam a_map() {
  TensorMapParam m;
  m.base_param = 0;
  m.dtype = DType::f16;
  m.shape = {LaunchScalar::of_param(1), LaunchScalar::of_param(2)};
  m.strides = {LaunchScalar::of_param(3), LaunchScalar::of_constant(1)};
  m.box = {128, 32};
  m.order = {1, 0};
  m.swizzle = SwizzleMode::Bytes64;
  m.source = "matmul.cpp:44";
  return m;
}

std::vector<LaunchArg> args(uint64_t base, int64_t M, int64_t K, int64_t stride_am) {
  return {LaunchArg::pointer(base), LaunchArg::of_int(M), LaunchArg::of_int(K), LaunchArg::of_int(stride_am)};
}

TEST(TensorMapArgs, SpecFollowsTheArgumentsInnermostDimFirst) {
  rt::TensorMapSpec s = tensor_map_spec(a_map(), kParams, args(kBase, 4096, 1024, 1024));
  EXPECT_EQ(s.element, rt::TensorMapElement::f16);
  EXPECT_EQ(s.global_address, kBase);
  EXPECT_EQ(s.global_dims, (std::vector<int64_t>{1024, 4096}));
  EXPECT_EQ(s.global_strides_bytes, (std::vector<int64_t>{2, 2048}));
  EXPECT_EQ(s.box_dims, (std::vector<int64_t>{32, 128}));
  EXPECT_EQ(s.swizzle, rt::TensorMapSwizzle::span64);
  EXPECT_EQ(s.oob_fill, rt::TensorMapOobFill::zero);
  EXPECT_TRUE(rt::is_legal(s)) << rt::describe(s);
}

TEST(TensorMapArgs, AnUnalignedStrideKeepsTheCpAsyncPathAndSaysWhy) {
  TensorMapArgs t = tensor_map_args({a_map()}, kParams, args(kBase, 4096, 1001, 1001));
  EXPECT_EQ(t.use_tma, 0);
  ASSERT_EQ(t.maps.size(), 1u);
  EXPECT_NE(t.why_not.find("map 0 (make_block_ptr at matmul.cpp:44)"), std::string::npos) << t.why_not;
  EXPECT_NE(t.why_not.find("multiple of 16"), std::string::npos) << t.why_not;
}

TEST(TensorMapArgs, AnUnalignedBaseKeepsTheCpAsyncPath) {
  TensorMapArgs t = tensor_map_args({a_map()}, kParams, args(kBase + 2, 4096, 1024, 1024));
  EXPECT_EQ(t.use_tma, 0);
  EXPECT_NE(t.why_not.find("map 0"), std::string::npos) << t.why_not;
}

TEST(TensorMapArgs, DimsBeyond32BitCoordinatesKeepTheCpAsyncPath) {
  // 2^31 rows of 16 elements: within the driver's 2^32, beyond the kernel's int coordinates.
  TensorMapArgs t = tensor_map_args({a_map()}, kParams, args(kBase, int64_t{1} << 31, 16, 16));
  EXPECT_EQ(t.use_tma, 0);
  EXPECT_NE(t.why_not.find("TMA coordinates are 32-bit signed"), std::string::npos) << t.why_not;
}

TEST(TensorMapArgs, LegalMapsNeedADriverWithTensorMaps) {
  TensorMapArgs t = tensor_map_args({a_map()}, kParams, args(kBase, 4096, 1024, 1024));
  if (rt::driver_available() && rt::driver().cuTensorMapEncodeTiled != nullptr)
    GTEST_SKIP() << "a CUDA driver with tensor maps is present: tests/gpu/tma_gpu_test.cpp covers encoding";
  EXPECT_EQ(t.use_tma, 0);
  EXPECT_NE(t.why_not.find("cuTensorMapEncodeTiled"), std::string::npos) << t.why_not;
}

// a_map() over a base `A + coordinate * stride_am` whose coordinate is >= 0 while M is (codegen/block_base.h):
// one per-program dim, `extent` long or, with `extent_param`, that parameter's value + 1.
TensorMapParam a_map_with_a_per_program_dim(int64_t extent, int extent_param = -1) {
  TensorMapParam m = a_map();
  OuterDim per_program;
  per_program.stride = LaunchScalar::of_param(3);
  per_program.extent = extent;
  per_program.extent_param = extent_param;
  per_program.nonneg_params = {1};
  m.outer = {per_program};
  return m;
}

TEST(TensorMapArgs, AParameterThatMakesAPerProgramCoordinateNegativeKeepsTheCpAsyncPath) {
  // A's base as `A + (pid / M) * stride_am`.
  const TensorMapParam m = a_map_with_a_per_program_dim(65535);
  TensorMapArgs t = tensor_map_args({m}, kParams, args(kBase, -4096, 1024, 1024));
  EXPECT_EQ(t.use_tma, 0);
  EXPECT_NE(t.why_not.find("'M' is -4096, so a per-program coordinate of the base may be negative"),
            std::string::npos)
      << t.why_not;
  t = tensor_map_args({m}, kParams, args(kBase, 4096, 1024, 1024));
  EXPECT_EQ(t.why_not.find("may be negative"), std::string::npos) << t.why_not;
}

TEST(TensorMapArgs, ACoordinateCappedByAParameterGivesADimThatParameterPlusOneLong) {
  // A's base as `A + min(x, M) * stride_am` (codegen/block_base.h): the coordinate is at most M, so the map's
  // outermost dim holds M + 1, whatever the launch's M is.
  const TensorMapParam m = a_map_with_a_per_program_dim(0, /*extent_param=*/1);
  rt::TensorMapSpec s = tensor_map_spec(m, kParams, args(kBase, 4096, 1024, 1024));
  EXPECT_EQ(s.global_dims, (std::vector<int64_t>{1024, 4096, 4097}));
  EXPECT_EQ(s.box_dims, (std::vector<int64_t>{32, 128, 1}));
  s = tensor_map_spec(m, kParams, args(kBase, 77, 1024, 1024));
  EXPECT_EQ(s.global_dims.back(), 78);
}

// A per-program dim whose stride is a product of parameters (codegen/block_base.h: `(b * H + h) * N`): the launch
// multiplies them, and a product past 64 bits keeps the cp.async path with the reason.
TEST(TensorMapArgs, AStrideThatIsAProductOfParametersIsTheirProduct) {
  TensorMapParam m = a_map_with_a_per_program_dim(65535);
  m.outer[0].stride = {{3, 2}, 2}; // stride_am * K * 2
  rt::TensorMapSpec s = tensor_map_spec(m, kParams, args(kBase, 4096, 1024, 1024));
  EXPECT_EQ(s.global_strides_bytes.back(), 1024 * 1024 * 2 * 2);
  TensorMapArgs t = tensor_map_args({m}, kParams, args(kBase, 4096, int64_t{1} << 40, int64_t{1} << 40));
  EXPECT_EQ(t.use_tma, 0);
  EXPECT_NE(t.why_not.find("a stride that is a product of the arguments overflows 64 bits"), std::string::npos)
      << t.why_not;
}

TEST(TensorMapArgs, NoMapsMeansNoExtraParameters) {
  TensorMapArgs t = tensor_map_args({}, kParams, args(kBase, 4096, 1024, 1024));
  EXPECT_TRUE(t.maps.empty());
  EXPECT_TRUE(t.why_not.empty());
}

} // namespace
