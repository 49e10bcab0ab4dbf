// Tensor-map specs (runtime/tensor_map.h): every rule of cuTensorMapEncodeTiled with the reason it gives,
// specs built from block pointers in both orders, their description, and the errors of encoding where it
// cannot happen. None of this needs a GPU.
#include "runtime/tensor_map.h"
#include "support/error.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

using namespace kiln;
using namespace kiln::rt;

namespace {

constexpr uint64_t kBase = 0x7f0000000000; // 16-, 32- and 1024-byte aligned, like a cuMemAlloc result

// A legal 2-D map: a row-major 4096 x 1024 f16 matrix, copied in 64 x 64 boxes with the 128-byte swizzle.
TensorMapSpec legal_2d() {
  TensorMapSpec s;
  s.element = TensorMapElement::f16;
  s.global_address = kBase;
  s.global_dims = {1024, 4096};
  s.global_strides_bytes = {2, 2048};
  s.box_dims = {64, 64};
  s.element_strides = {1, 1};
  s.swizzle = TensorMapSwizzle::span128;
  return s;
}

// A legal 3-D map for the interleave rules, which need rank 3: 32B interleave with its 32B swizzle.
TensorMapSpec legal_interleaved_3d() {
  TensorMapSpec s;
  s.element = TensorMapElement::f16;
  s.global_address = kBase;
  s.global_dims = {16, 64, 8};
  s.global_strides_bytes = {2, 64, 4096};
  s.box_dims = {16, 8, 1};
  s.element_strides = {1, 1, 1};
  s.interleave = TensorMapInterleave::chunk32;
  s.swizzle = TensorMapSwizzle::span32;
  return s;
}

// The one problem `s` has; fails the test when it has none or several.
std::string only_problem(const TensorMapSpec& s) {
  std::vector<std::string> problems = tensor_map_problems(s);
  EXPECT_EQ(problems.size(), 1u) << describe(s);
  return problems.empty() ? "" : problems[0];
}

TensorMapSpec with_rank(int rank) {
  TensorMapSpec s;
  s.element = TensorMapElement::f32;
  s.global_address = kBase;
  int64_t stride = 4;
  for (int d = 0; d < rank; ++d) {
    s.global_dims.push_back(4);
    s.global_strides_bytes.push_back(d == 0 ? 4 : stride);
    s.box_dims.push_back(4);
    s.element_strides.push_back(1);
    stride *= 16;
  }
  return s;
}

TEST(TensorMapRules, TheReferenceSpecsAreLegal) {
  EXPECT_TRUE(is_legal(legal_2d())) << describe(legal_2d());
  EXPECT_TRUE(is_legal(legal_interleaved_3d())) << describe(legal_interleaved_3d());
  for (int rank = 1; rank <= 5; ++rank)
    EXPECT_TRUE(is_legal(with_rank(rank))) << describe(with_rank(rank));
}

TEST(TensorMapRules, RankIsOneToFive) {
  EXPECT_EQ(only_problem(with_rank(0)), "rank 0: a tensor map has 1 to 5 dims");
  EXPECT_EQ(only_problem(with_rank(6)), "rank 6: a tensor map has 1 to 5 dims");
}

TEST(TensorMapRules, EveryPerDimListHasOneEntryPerDim) {
  TensorMapSpec s = legal_2d();
  s.box_dims = {64};
  EXPECT_EQ(only_problem(s), "box_dims has 1 entry but the tensor has 2 dims");
  s = legal_2d();
  s.global_strides_bytes = {2, 2048, 4096};
  EXPECT_EQ(only_problem(s), "global_strides_bytes has 3 entries but the tensor has 2 dims");
  s = legal_2d();
  s.element_strides = {};
  EXPECT_EQ(only_problem(s), "element_strides has 0 entries but the tensor has 2 dims");
  s = legal_2d();
  s.source_dims = {0, 1, 2};
  EXPECT_EQ(only_problem(s), "source_dims has 3 entries but the tensor has 2 dims");
}

TEST(TensorMapRules, AddressIsSixteenByteAligned) {
  TensorMapSpec s = legal_2d();
  s.global_address = kBase + 8;
  EXPECT_EQ(only_problem(s), "global address 0x7f0000000008 is not 16-byte aligned");
  s.global_address = kBase + 16;
  EXPECT_TRUE(is_legal(s));
  s.global_address = 0;
  EXPECT_EQ(only_problem(s), "the global address is null");
}

TEST(TensorMapRules, AddressIsThirtyTwoByteAlignedWithThirtyTwoByteInterleave) {
  TensorMapSpec s = legal_interleaved_3d();
  s.global_address = kBase + 16;
  EXPECT_EQ(only_problem(s), "global address 0x7f0000000010 is not 32-byte aligned");
}

TEST(TensorMapRules, DimsAreInOneToTwoToTheThirtyTwo) {
  TensorMapSpec s = legal_2d();
  s.global_dims[1] = 0;
  EXPECT_EQ(only_problem(s), "dim 1 is 0 elements, must be in [1, 2^32]");
  s.global_dims[1] = (int64_t{1} << 32) + 1;
  EXPECT_EQ(only_problem(s), "dim 1 is 4294967297 elements, must be in [1, 2^32]");
  s.global_dims[1] = int64_t{1} << 32;
  EXPECT_TRUE(is_legal(s)) << describe(s);
}

TEST(TensorMapRules, InnermostDimIsContiguous) {
  TensorMapSpec s = legal_2d();
  s.global_strides_bytes[0] = 4;
  EXPECT_EQ(
      only_problem(s),
      "dim 0 has a stride of 4 bytes; the innermost dim must be contiguous (a stride of one f16, 2 bytes)");
}

TEST(TensorMapRules, StridesAreMultiplesOfSixteenBytes) {
  TensorMapSpec s = legal_2d();
  s.global_strides_bytes[1] = 200;
  EXPECT_EQ(only_problem(s), "stride of dim 1 is 200 bytes, not a multiple of 16");
  s.global_strides_bytes[1] = 208;
  EXPECT_TRUE(is_legal(s)) << describe(s);
}

TEST(TensorMapRules, StridesAreMultiplesOfThirtyTwoBytesWithThirtyTwoByteInterleave) {
  TensorMapSpec s = legal_interleaved_3d();
  s.global_strides_bytes[1] = 48;
  EXPECT_EQ(only_problem(s), "stride of dim 1 is 48 bytes, not a multiple of 32");
}

TEST(TensorMapRules, StridesAreBelowTwoToTheForty) {
  TensorMapSpec s = legal_2d();
  s.global_strides_bytes[1] = int64_t{1} << 40;
  EXPECT_EQ(only_problem(s), "stride of dim 1 is 1099511627776 bytes, must be below 2^40");
  s.global_strides_bytes[1] = (int64_t{1} << 40) - 16;
  EXPECT_TRUE(is_legal(s)) << describe(s);
}

TEST(TensorMapRules, StridesArePositive) {
  TensorMapSpec s = legal_2d();
  s.global_strides_bytes[1] = 0;
  EXPECT_EQ(only_problem(s), "stride of dim 1 is 0 bytes, must be positive");
  s.global_strides_bytes[1] = -2048;
  EXPECT_EQ(only_problem(s), "stride of dim 1 is -2048 bytes, must be positive");
}

TEST(TensorMapRules, BoxDimsAreOneToTwoHundredFiftySix) {
  TensorMapSpec s = legal_2d();
  s.box_dims[1] = 0;
  EXPECT_EQ(only_problem(s), "box dim 1 is 0 elements, must be in [1, 256]");
  s.box_dims[1] = 257;
  EXPECT_EQ(only_problem(s), "box dim 1 is 257 elements, must be in [1, 256]");
  s.box_dims[1] = 256;
  EXPECT_TRUE(is_legal(s)) << describe(s);
}

TEST(TensorMapRules, InnerBoxRowIsAMultipleOfSixteenBytes) {
  TensorMapSpec s = legal_2d();
  s.swizzle = TensorMapSwizzle::none;
  s.box_dims[0] = 4;
  EXPECT_EQ(only_problem(s), "the box's inner dim is 4 x 2 = 8 bytes, not a multiple of 16");
  s.box_dims[0] = 8;
  EXPECT_TRUE(is_legal(s)) << describe(s);
  s.box_dims[0] = 256; // no swizzle: no span limits the row
  EXPECT_TRUE(is_legal(s)) << describe(s);
}

TEST(TensorMapRules, SwizzledInnerBoxRowFitsTheSpan) {
  TensorMapSpec s = legal_2d();
  s.box_dims[0] = 128;
  EXPECT_EQ(only_problem(s), "the box's inner dim is 256 bytes, wider than the 128-byte swizzle span");
  s.swizzle = TensorMapSwizzle::span64;
  s.box_dims[0] = 64;
  EXPECT_EQ(only_problem(s), "the box's inner dim is 128 bytes, wider than the 64-byte swizzle span");
  s.box_dims[0] = 32;
  EXPECT_TRUE(is_legal(s)) << describe(s);
  s.swizzle = TensorMapSwizzle::span32;
  EXPECT_EQ(only_problem(s), "the box's inner dim is 64 bytes, wider than the 32-byte swizzle span");
  s.box_dims[0] = 16;
  EXPECT_TRUE(is_legal(s)) << describe(s);
}

TEST(TensorMapRules, ElementStridesAreOneToEight) {
  TensorMapSpec s = legal_2d();
  s.element_strides[1] = 0;
  EXPECT_EQ(only_problem(s), "element stride of dim 1 is 0, must be in [1, 8]");
  s.element_strides[1] = 9;
  EXPECT_EQ(only_problem(s), "element stride of dim 1 is 9, must be in [1, 8]");
  s.element_strides[1] = 8;
  EXPECT_TRUE(is_legal(s)) << describe(s);
}

TEST(TensorMapRules, InterleaveNeedsRankThree) {
  TensorMapSpec s = legal_2d();
  s.interleave = TensorMapInterleave::chunk16;
  EXPECT_EQ(only_problem(s), "16B interleave needs rank 3 or more, the tensor has 2");
}

TEST(TensorMapRules, ThirtyTwoByteInterleaveNeedsTheThirtyTwoByteSwizzle) {
  TensorMapSpec s = legal_interleaved_3d();
  s.swizzle = TensorMapSwizzle::span128;
  EXPECT_EQ(only_problem(s), "32B interleave needs the 32B swizzle, not 128B");
}

TEST(TensorMapRules, NanFillNeedsFloatingPointElements) {
  TensorMapSpec s = legal_2d();
  s.oob_fill = TensorMapOobFill::nan_request_zero_fma;
  EXPECT_TRUE(is_legal(s)) << describe(s);
  s.element = TensorMapElement::i32;
  s.global_strides_bytes[0] = 4;
  s.box_dims[0] = 32;
  EXPECT_EQ(only_problem(s), "the NaN out-of-bounds fill needs a floating-point element type, not i32");
}

TEST(TensorMapRules, EveryProblemIsReportedAtOnce) {
  TensorMapSpec s = legal_2d();
  s.global_address = kBase + 4;
  s.global_strides_bytes[1] = 200;
  s.box_dims[1] = 300;
  std::vector<std::string> problems = tensor_map_problems(s);
  ASSERT_EQ(problems.size(), 3u) << describe(s);
  EXPECT_EQ(problems[0], "global address 0x7f0000000004 is not 16-byte aligned");
  EXPECT_EQ(problems[1], "stride of dim 1 is 200 bytes, not a multiple of 16");
  EXPECT_EQ(problems[2], "box dim 1 is 300 elements, must be in [1, 256]");
}

TEST(TensorMapElements, NamesSizesAndKinds) {
  struct Case {
    TensorMapElement element;
    const char* name;
    int bytes;
    bool floating;
  };
  for (const Case& c :
       {Case{TensorMapElement::u8, "u8", 1, false}, Case{TensorMapElement::i32, "i32", 4, false},
        Case{TensorMapElement::i64, "i64", 8, false}, Case{TensorMapElement::f16, "f16", 2, true},
        Case{TensorMapElement::bf16, "bf16", 2, true}, Case{TensorMapElement::f32, "f32", 4, true},
        Case{TensorMapElement::f64, "f64", 8, true}}) {
    EXPECT_EQ(tensor_map_element_name(c.element), c.name);
    EXPECT_EQ(tensor_map_element_bytes(c.element), c.bytes) << c.name;
    EXPECT_EQ(is_floating_point(c.element), c.floating) << c.name;
  }
  EXPECT_EQ(swizzle_span_bytes(TensorMapSwizzle::none), 0);
  EXPECT_EQ(swizzle_span_bytes(TensorMapSwizzle::span32), 32);
  EXPECT_EQ(swizzle_span_bytes(TensorMapSwizzle::span64), 64);
  EXPECT_EQ(swizzle_span_bytes(TensorMapSwizzle::span128), 128);
}

// --- specs from block pointers ---------------------------------------------------------------------------

BlockPointerGeometry row_major_matrix() {
  // A: 4096 x 1024 f16, row-major, read in 128 x 64 blocks; order 1,0 (columns vary fastest).
  BlockPointerGeometry g;
  g.element = TensorMapElement::f16;
  g.base_address = kBase;
  g.shape = {4096, 1024};
  g.strides = {1024, 1};
  g.block_shape = {128, 64};
  g.order = {1, 0};
  return g;
}

TEST(TensorMapFromBlockPointer, RowMajorMatrixPutsColumnsFirst) {
  TensorMapSpec s = tensor_map_spec_for_block_pointer(row_major_matrix(), TensorMapSwizzle::span128,
                                                      TensorMapOobFill::zero);
  EXPECT_EQ(s.element, TensorMapElement::f16);
  EXPECT_EQ(s.global_address, kBase);
  EXPECT_EQ(s.global_dims, (std::vector<int64_t>{1024, 4096}));
  EXPECT_EQ(s.global_strides_bytes, (std::vector<int64_t>{2, 2048}));
  EXPECT_EQ(s.box_dims, (std::vector<int64_t>{64, 128}));
  EXPECT_EQ(s.element_strides, (std::vector<int64_t>{1, 1}));
  EXPECT_EQ(s.source_dims, (std::vector<int>{1, 0}));
  EXPECT_EQ(s.swizzle, TensorMapSwizzle::span128);
  EXPECT_EQ(s.interleave, TensorMapInterleave::none);
  EXPECT_EQ(s.l2_promotion, TensorMapL2Promotion::none);
  EXPECT_EQ(s.oob_fill, TensorMapOobFill::zero);
  EXPECT_TRUE(is_legal(s)) << describe(s);
}

TEST(TensorMapFromBlockPointer, ColumnMajorMatrixPutsRowsFirst) {
  // Bᵀ read through a transposed block pointer: K x N = 1024 x 512 f16, element (k, n) at k + 1024 n, so
  // rows vary fastest (order 0,1).
  BlockPointerGeometry g;
  g.element = TensorMapElement::f16;
  g.base_address = kBase;
  g.shape = {1024, 512};
  g.strides = {1, 1024};
  g.block_shape = {64, 128};
  g.order = {0, 1};
  TensorMapSpec s = tensor_map_spec_for_block_pointer(
      g, TensorMapSwizzle::span128, TensorMapOobFill::nan_request_zero_fma, TensorMapL2Promotion::bytes256);
  EXPECT_EQ(s.global_dims, (std::vector<int64_t>{1024, 512}));
  EXPECT_EQ(s.global_strides_bytes, (std::vector<int64_t>{2, 2048}));
  EXPECT_EQ(s.box_dims, (std::vector<int64_t>{64, 128}));
  EXPECT_EQ(s.source_dims, (std::vector<int>{0, 1}));
  EXPECT_EQ(s.oob_fill, TensorMapOobFill::nan_request_zero_fma);
  EXPECT_EQ(s.l2_promotion, TensorMapL2Promotion::bytes256);
  EXPECT_TRUE(is_legal(s)) << describe(s);
}

TEST(TensorMapFromBlockPointer, RowMajorBatchOfMatrices) {
  // 8 x 256 x 128 f32, row-major, read one matrix's 64 x 32 block at a time.
  BlockPointerGeometry g;
  g.element = TensorMapElement::f32;
  g.base_address = kBase;
  g.shape = {8, 256, 128};
  g.strides = {256 * 128, 128, 1};
  g.block_shape = {1, 64, 32};
  g.order = {2, 1, 0};
  TensorMapSpec s = tensor_map_spec_for_block_pointer(g, TensorMapSwizzle::span128, TensorMapOobFill::zero);
  EXPECT_EQ(s.global_dims, (std::vector<int64_t>{128, 256, 8}));
  EXPECT_EQ(s.global_strides_bytes, (std::vector<int64_t>{4, 512, 131072}));
  EXPECT_EQ(s.box_dims, (std::vector<int64_t>{32, 64, 1}));
  EXPECT_EQ(s.element_strides, (std::vector<int64_t>{1, 1, 1}));
  EXPECT_EQ(s.source_dims, (std::vector<int>{2, 1, 0}));
  EXPECT_TRUE(is_legal(s)) << describe(s);
}

TEST(TensorMapFromBlockPointer, ColumnMajorBatchWithHeadsBetweenRows) {
  // Attention's K as [heads, D, N] read transposed out of a [N, heads, D] bf16 tensor: element (h, d, n) at
  // n * heads * D + h * D + d. d varies fastest, then n, then h: strides that do not nest, as TMA allows.
  const int64_t heads = 16, D = 128, N = 4096;
  BlockPointerGeometry g;
  g.element = TensorMapElement::bf16;
  g.base_address = kBase;
  g.shape = {heads, D, N};
  g.strides = {D, 1, heads * D};
  g.block_shape = {1, 64, 128};
  g.order = {1, 2, 0};
  TensorMapSpec s = tensor_map_spec_for_block_pointer(g, TensorMapSwizzle::span128, TensorMapOobFill::zero);
  EXPECT_EQ(s.global_dims, (std::vector<int64_t>{D, N, heads}));
  EXPECT_EQ(s.global_strides_bytes, (std::vector<int64_t>{2, heads * D * 2, D * 2}));
  EXPECT_EQ(s.box_dims, (std::vector<int64_t>{64, 128, 1}));
  EXPECT_EQ(s.source_dims, (std::vector<int>{1, 2, 0}));
  EXPECT_TRUE(is_legal(s)) << describe(s);
}

TEST(TensorMapFromBlockPointer, ReasonsNameTheBlockPointersDims) {
  BlockPointerGeometry g = row_major_matrix();
  g.shape = {4096, 100};
  g.strides = {100, 1}; // rows of 200 bytes
  TensorMapSpec s = tensor_map_spec_for_block_pointer(g, TensorMapSwizzle::span128, TensorMapOobFill::zero);
  EXPECT_EQ(only_problem(s), "stride of dim 1 (block-pointer dim 0) is 200 bytes, not a multiple of 16");

  g = row_major_matrix();
  g.order = {0, 1}; // claims rows vary fastest, but columns are the contiguous dim
  s = tensor_map_spec_for_block_pointer(g, TensorMapSwizzle::none, TensorMapOobFill::zero);
  std::vector<std::string> problems = tensor_map_problems(s);
  ASSERT_FALSE(problems.empty());
  EXPECT_EQ(problems[0], "dim 0 (block-pointer dim 0) has a stride of 2048 bytes; the innermost dim must be "
                         "contiguous (a stride of one f16, 2 bytes)");
}

TEST(TensorMapFromBlockPointer, TooManyDimsIsAReasonNotAnError) {
  BlockPointerGeometry g;
  g.element = TensorMapElement::f32;
  g.base_address = kBase;
  g.shape = {2, 2, 2, 2, 2, 4};
  g.strides = {256, 128, 64, 32, 4, 1};
  g.block_shape = {1, 1, 1, 1, 1, 4};
  g.order = {5, 4, 3, 2, 1, 0};
  TensorMapSpec s = tensor_map_spec_for_block_pointer(g, TensorMapSwizzle::none, TensorMapOobFill::zero);
  EXPECT_EQ(only_problem(s), "rank 6: a tensor map has 1 to 5 dims");
}

// Runs `build` and returns the kiln::Error's message; fails the test when it does not throw one.
template <typename F> std::string error_of(F build) {
  try {
    build();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected a kiln::Error";
  return "";
}

TEST(TensorMapFromBlockPointer, MalformedGeometryIsAnError) {
  auto spec_for = [](const BlockPointerGeometry& g) {
    return [g] { tensor_map_spec_for_block_pointer(g, TensorMapSwizzle::none, TensorMapOobFill::zero); };
  };
  BlockPointerGeometry g = row_major_matrix();
  g.shape = {};
  g.strides = {};
  g.block_shape = {};
  g.order = {};
  EXPECT_EQ(error_of(spec_for(g)),
            "a block pointer for a tensor map needs at least one dim; its shape is empty");

  g = row_major_matrix();
  g.strides = {1};
  EXPECT_EQ(error_of(spec_for(g)),
            "a block pointer's strides must have one entry per dim: expected 2 (the shape's), got 1");
  g = row_major_matrix();
  g.block_shape = {1, 2, 3};
  EXPECT_EQ(error_of(spec_for(g)),
            "a block pointer's block shape must have one entry per dim: expected 2 (the shape's), got 3");
  g = row_major_matrix();
  g.order = {0};
  EXPECT_EQ(error_of(spec_for(g)),
            "a block pointer's order must have one entry per dim: expected 2 (the shape's), got 1");
  g.order = {1, 1};
  EXPECT_EQ(error_of(spec_for(g)),
            "a block pointer's order must be a permutation of its dims 0..1, got [1, 1]");
  g.order = {0, 2};
  EXPECT_EQ(error_of(spec_for(g)),
            "a block pointer's order must be a permutation of its dims 0..1, got [0, 2]");
  g.order = {-1, 0};
  EXPECT_EQ(error_of(spec_for(g)),
            "a block pointer's order must be a permutation of its dims 0..1, got [-1, 0]");

  g = row_major_matrix();
  g.strides = {int64_t{1} << 62, 1};
  EXPECT_EQ(error_of(spec_for(g)),
            "a block pointer's stride of dim 0 is 4611686018427387904 elements of 2 bytes, "
            "which overflows 64 bits");
}

// --- description -----------------------------------------------------------------------------------------

TEST(TensorMapDescription, LegalSpec) {
  TensorMapSpec s = tensor_map_spec_for_block_pointer(row_major_matrix(), TensorMapSwizzle::span128,
                                                      TensorMapOobFill::nan_request_zero_fma);
  EXPECT_EQ(describe(s),
            "tensor map of f16 at 0x7f0000000000: dims [1024, 4096] innermost first (block-pointer "
            "dims [1, 0]), strides [2, 2048] bytes, box [64, 128], element strides [1, 1], swizzle 128B, "
            "interleave none, L2 promotion none, out-of-bounds fill NaN (zero in FMAs): legal");
}

TEST(TensorMapDescription, IllegalSpecSaysWhy) {
  TensorMapSpec s = legal_2d();
  s.global_strides_bytes[1] = 200;
  s.box_dims[0] = 128;
  EXPECT_EQ(describe(s),
            "tensor map of f16 at 0x7f0000000000: dims [1024, 4096] innermost first, strides [2, 200] "
            "bytes, box [128, 64], element strides [1, 1], swizzle 128B, interleave none, L2 promotion "
            "none, out-of-bounds fill zero: not legal: stride of dim 1 is 200 bytes, not a multiple of "
            "16; the box's inner dim is 256 bytes, wider than the 128-byte swizzle span");
}

// --- encoding where it cannot happen ---------------------------------------------------------------------

TEST(TensorMapEncoding, IllegalSpecIsRefusedBeforeTheDriverIsAsked) {
  TensorMapSpec s = legal_2d();
  s.global_address = kBase + 2;
  std::string message = error_of([&] { encode_tensor_map(s); });
  EXPECT_EQ(message.rfind("cannot encode a tensor map that breaks the driver's rules: tensor map of f16", 0),
            0u)
      << message;
  EXPECT_NE(message.find("not legal: global address 0x7f0000000002 is not 16-byte aligned"),
            std::string::npos)
      << message;
}

TEST(TensorMapEncoding, WithoutADriverTheErrorSaysSo) {
  std::string why;
  if (driver_available(&why))
    GTEST_SKIP() << "this machine has a CUDA driver; the no-driver error is checked where there is none "
                    "(tests/gpu/tensor_map_gpu_test.cpp encodes for real)";
  std::string message = error_of([] { encode_tensor_map(legal_2d()); });
  EXPECT_EQ(message, "encoding a tensor map needs the CUDA driver, and there is none usable: " + why);
}

} // namespace
