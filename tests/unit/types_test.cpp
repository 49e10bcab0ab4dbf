// Types and dtypes: Type::str for every kind, numel, with_shape/with_elem, dtype names, parsing,
// sizes, integer ranges and the promotion table.
#include "dsl/dtype.h"
#include "dsl/type.h"
#include "support/error.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <iterator>
#include <limits>

using namespace kiln;

namespace {

constexpr DType kAll[] = {i1, u8, i32, i64, f16, bf16, f32, f64};

TEST(Type, StrOfEveryKind) {
  EXPECT_EQ(Type::scalar(f32).str(), "f32");
  EXPECT_EQ(Type::scalar(i1).str(), "i1");
  EXPECT_EQ(Type::tensor(f16, {128, 64}).str(), "tensor<128x64xf16>");
  EXPECT_EQ(Type::tensor(bf16, {16}).str(), "tensor<16xbf16>");
  EXPECT_EQ(Type::pointer(f16).str(), "ptr<f16>");
  EXPECT_EQ(Type::pointer(f32, {64}).str(), "tensor<64xptr<f32>>");
  EXPECT_EQ(Type::pointer(u8, {8, 4}).str(), "tensor<8x4xptr<u8>>");
  EXPECT_EQ(Type::block_ptr(f16, {64, 32}, {1, 0}).str(), "block_ptr<64x32xf16, order=1,0>");
  EXPECT_EQ(Type::block_ptr(f32, {2, 16, 8}, {2, 0, 1}).str(), "block_ptr<2x16x8xf32, order=2,0,1>");
}

TEST(Type, KindPredicates) {
  EXPECT_TRUE(Type::scalar(i32).is_scalar());
  EXPECT_TRUE(Type::scalar(i32).is_tensor());
  EXPECT_TRUE(Type::pointer(f32).is_scalar()) << "a pointer argument is a scalar pointer";
  EXPECT_FALSE(Type::pointer(f32, {16}).is_scalar());
  EXPECT_FALSE(Type::block_ptr(f32, {16}, {0}).is_scalar()) << "a block pointer is never a scalar";
  EXPECT_TRUE(Type::block_ptr(f32, {16}, {0}).is_block_ptr());
  EXPECT_EQ(Type::tensor(f32, {4, 8, 16}).rank(), 3);
  EXPECT_EQ(Type::scalar(f32).rank(), 0);
}

TEST(Type, Numel) {
  EXPECT_EQ(Type::scalar(f32).numel(), 1);
  EXPECT_EQ(Type::tensor(f16, {128, 64}).numel(), 128 * 64);
  EXPECT_EQ(Type::pointer(f32, {32}).numel(), 32);
  EXPECT_EQ(Type::block_ptr(f16, {2, 16, 8}, {2, 1, 0}).numel(), 256);
}

TEST(Type, WithShapeAndWithElemKeepTheRest) {
  Type bp = Type::block_ptr(f16, {64, 32}, {0, 1});
  Type reshaped = bp.with_shape({32, 64});
  EXPECT_EQ(reshaped.kind, TypeKind::BlockPtr);
  EXPECT_EQ(reshaped.elem, f16);
  EXPECT_EQ(reshaped.order, (llvm::SmallVector<int, 4>{0, 1}));
  EXPECT_EQ(reshaped.shape, (Shape{32, 64}));

  Type ptrs = Type::pointer(f32, {16});
  Type as_bf16 = ptrs.with_elem(bf16);
  EXPECT_EQ(as_bf16, Type::pointer(bf16, {16}));
  EXPECT_EQ(ptrs, Type::pointer(f32, {16})) << "with_elem returns a copy";
  EXPECT_EQ(Type::tensor(i32, {8}).with_shape({}), Type::scalar(i32));
}

TEST(Type, EqualityComparesKindElemShapeAndOrder) {
  EXPECT_EQ(Type::tensor(f32, {16}), Type::tensor(f32, {16}));
  EXPECT_NE(Type::tensor(f32, {16}), Type::tensor(f16, {16}));
  EXPECT_NE(Type::tensor(f32, {16}), Type::tensor(f32, {32}));
  EXPECT_NE(Type::tensor(f32, {16}), Type::pointer(f32, {16}));
  EXPECT_NE(Type::block_ptr(f16, {16, 16}, {1, 0}), Type::block_ptr(f16, {16, 16}, {0, 1}));
}

TEST(Type, ShapeStr) {
  EXPECT_EQ(shape_str({}), "()");
  EXPECT_EQ(shape_str({16}), "(16,)");
  EXPECT_EQ(shape_str({128, 64}), "(128, 64)");
  EXPECT_EQ(shape_str({2, 4, 8}), "(2, 4, 8)");
}

TEST(DType, NamesRoundTripThroughParse) {
  const char* names[] = {"i1", "u8", "i32", "i64", "f16", "bf16", "f32", "f64"};
  for (size_t i = 0; i < std::size(kAll); ++i) {
    EXPECT_EQ(dtype_name(kAll[i]), names[i]);
    ASSERT_TRUE(parse_dtype(names[i]).has_value()) << names[i];
    EXPECT_EQ(*parse_dtype(names[i]), kAll[i]);
  }
  for (const char* bad : {"", "F16", "float", "i8", "f8", "bfloat16", "f16 "})
    EXPECT_FALSE(parse_dtype(bad).has_value()) << "'" << bad << "'";
}

TEST(DType, BytesAndClasses) {
  const int bytes[] = {1, 1, 4, 8, 2, 2, 4, 8};
  for (size_t i = 0; i < std::size(kAll); ++i)
    EXPECT_EQ(dtype_bytes(kAll[i]), bytes[i]) << dtype_name(kAll[i]);
  for (DType t : {f16, bf16, f32, f64}) {
    EXPECT_TRUE(is_float(t));
    EXPECT_FALSE(is_int(t));
  }
  for (DType t : {i1, u8, i32, i64}) {
    EXPECT_TRUE(is_int(t));
    EXPECT_FALSE(is_float(t));
  }
}

TEST(DType, IntegerRanges) {
  EXPECT_EQ(int_range(i1), (std::pair<int64_t, int64_t>{0, 1}));
  EXPECT_EQ(int_range(u8), (std::pair<int64_t, int64_t>{0, 255}));
  EXPECT_EQ(int_range(i32).second, 2147483647);
  EXPECT_THROW(int_range(f32), InternalError);
  EXPECT_TRUE(int_dtype_holds(u8, 255));
  EXPECT_FALSE(int_dtype_holds(u8, 256));
  EXPECT_FALSE(int_dtype_holds(u8, -1));
  EXPECT_FALSE(int_dtype_holds(i32, 0.5));
  EXPECT_FALSE(int_dtype_holds(i32, 2147483648.0));
  EXPECT_TRUE(int_dtype_holds(i32, -2147483648.0));
  EXPECT_TRUE(int_dtype_holds(i64, -9223372036854775808.0));
  EXPECT_FALSE(int_dtype_holds(i64, 9223372036854775808.0));
  EXPECT_FALSE(int_dtype_holds(i64, std::numeric_limits<double>::infinity()));
  EXPECT_FALSE(int_dtype_holds(i32, std::numeric_limits<double>::quiet_NaN()));
}

TEST(DType, PromotionTable) {
  struct Case {
    DType a, b, want;
  };
  const Case cases[] = {
      {f16, bf16, f32}, // neither holds the other
      {i32, f16, f16},  {i32, bf16, bf16}, {i64, f16, f16}, // float beats int
      {i32, i64, i64},  {i1, u8, u8},      {u8, i32, i32},  {i1, i32, i32}, // wider int beats narrower
      {f16, f32, f32},  {bf16, f32, f32},  {f32, f64, f64}, {i64, f32, f32}, {i64, f64, f64},
      {i1, f16, f16},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(promote(c.a, c.b), c.want) << dtype_name(c.a) << " + " << dtype_name(c.b);
    EXPECT_EQ(promote(c.b, c.a), c.want) << dtype_name(c.b) << " + " << dtype_name(c.a);
  }
}

TEST(DType, PromotionProperties) {
  for (DType a : kAll) {
    EXPECT_EQ(promote(a, a), a);
    for (DType b : kAll) {
      DType p = promote(a, b);
      EXPECT_EQ(p, promote(b, a)) << "symmetric";
      if (is_float(a) || is_float(b)) {
        EXPECT_TRUE(is_float(p)) << dtype_name(a) << " + " << dtype_name(b) << " keeps a float";
      }
      EXPECT_GE(dtype_rank(p), std::max(dtype_rank(a), dtype_rank(b))) << "never narrower than an operand";
      for (DType c : kAll) // associativity keeps chains of binary ops independent of grouping
        EXPECT_EQ(promote(promote(a, b), c), promote(a, promote(b, c)))
            << dtype_name(a) << ", " << dtype_name(b) << ", " << dtype_name(c);
    }
  }
}

} // namespace
