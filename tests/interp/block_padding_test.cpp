// Block-pointer loads padded with any value: past the tensor along the boundary-checked dims a load reads the
// padding rounded to the block's dtype (any float, ±inf and NaN included, for a float block; an integer the
// dtype holds for an integer block), and the elements inside are untouched. The use case: a row max over a
// row of any length, read in chunks whose last one runs past the row, padded with -inf (zero padding would
// give 0 for a row of negative numbers).
#include "dsl/dsl.h"
#include "dsl/interpreter.h"
#include "support/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>

using namespace kiln;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

// Every element of a (4, 8) block over a (3, 5) tensor, padded with `pad`.
struct PaddedBlock {
  HostBuffer x, raw;
};
PaddedBlock load_padded(DType t, Padding pad) {
  KernelBuilder kb("padded");
  Value x = kb.arg_ptr("x", t), raw = kb.arg_ptr("raw", t);
  Value bp = make_block_ptr(x, {3, 5}, {5, 1}, {0, 0}, {4, 8}, {1, 0});
  store(raw + arange(0, 4).expand_dims(1) * 8 + arange(0, 8).expand_dims(0), load(bp, {0, 1}, pad));
  Kernel k = kb.finish();
  PaddedBlock b{HostBuffer(t, 15, "x"), HostBuffer(t, 32, "raw")};
  for (int64_t i = 0; i < 15; ++i)
    b.x.set(i, static_cast<double>(i) - 7);
  interpret(k, {1, 1, 1}, {InterpArg::ptr(b.x), InterpArg::ptr(b.raw)});
  return b;
}

double round_to(double x, DType t) {
  switch (t) {
  case DType::f64:
    return x;
  case DType::f32:
    return static_cast<float>(x);
  case DType::f16:
    return f16_bits_to_float(float_to_f16_bits(static_cast<float>(x)));
  default:
    return bf16_bits_to_float(float_to_bf16_bits(static_cast<float>(x)));
  }
}

class BlockPaddingInterp : public ::testing::TestWithParam<DType> {};

TEST_P(BlockPaddingInterp, AnyFloatValuePadsOutsideOnly) {
  const DType t = GetParam();
  for (double v : {7.5, -1.0, 0.1, -0.0, kInf, -kInf, 1e4}) {
    PaddedBlock b = load_padded(t, v);
    for (int i = 0; i < 4; ++i)
      for (int j = 0; j < 8; ++j) {
        const double got = b.raw.get(i * 8 + j);
        if (i < 3 && j < 5) {
          EXPECT_EQ(got, b.x.get(i * 5 + j)) << "inside (" << i << ", " << j << ") with padding " << v;
          continue;
        }
        EXPECT_EQ(got, round_to(v, t))
            << "padding " << v << " at (" << i << ", " << j << ") in " << dtype_name(t);
        EXPECT_EQ(std::signbit(got), std::signbit(v)) << "the sign of padding " << v;
      }
  }
  PaddedBlock nan = load_padded(t, Padding::NaN);
  EXPECT_TRUE(std::isnan(nan.raw.get(31)));
  EXPECT_EQ(nan.raw.get(0), -7.0);
}

// The row max of a (rows, cols) tensor, one program a row, in chunks of 16 columns: the last chunk runs past
// the row and pads with -inf (a plain float, as users write it), so the max of an all-negative row is right.
TEST_P(BlockPaddingInterp, NegInfPaddingServesAChunkedRowMax) {
  const DType t = GetParam();
  KernelBuilder kb("chunked_row_max");
  Value x = kb.arg_ptr("x", t), m = kb.arg_ptr("m", t);
  Value rows = kb.arg("rows", i32), cols = kb.arg("cols", i32);
  Value bp = make_block_ptr(x, {rows, cols}, {cols, 1}, {program_id(0), 0}, {1, 16}, {1, 0});
  Value best = full({1}, -kInf, t);
  for_range(0, cols, 16, [&](Value) {
    best = maximum(best, max(load(bp, {1}, -std::numeric_limits<float>::infinity()), 1));
    bp = advance(bp, {0, 16});
  });
  store(m + program_id(0) + arange(0, 1), best);
  Kernel k = kb.finish();
  const int64_t R = 3, C = 37; // 3 chunks, the last with 5 columns inside
  HostBuffer hx(t, R * C, "x"), hm(t, R, "m");
  std::mt19937 rng(11);
  std::uniform_real_distribution<double> dist(-50, -1);
  for (int64_t i = 0; i < R * C; ++i)
    hx.set(i, dist(rng));
  interpret(k, {R, 1, 1},
            {InterpArg::ptr(hx), InterpArg::ptr(hm), InterpArg::of_int(R), InterpArg::of_int(C)});
  for (int64_t r = 0; r < R; ++r) {
    double want = -kInf;
    for (int64_t c = 0; c < C; ++c)
      want = std::max(want, hx.get(r * C + c));
    EXPECT_EQ(hm.get(r), want) << "row " << r;
    EXPECT_LT(hm.get(r), 0) << "row " << r << ": no zero from the padding";
  }
}

INSTANTIATE_TEST_SUITE_P(dtypes, BlockPaddingInterp,
                         ::testing::Values(DType::f16, DType::bf16, DType::f32, DType::f64),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST(BlockPaddingInterp, IntegerBlocksPadWithAnIntegerTheyHold) {
  for (DType t : {DType::i32, DType::i64}) {
    for (double v : {-1.0, 42.0, -2147483648.0}) {
      PaddedBlock b = load_padded(t, v);
      EXPECT_EQ(b.raw.get(7), v) << dtype_name(t) << " padded with " << v;
      EXPECT_EQ(b.raw.get(31), v) << dtype_name(t) << " padded with " << v;
      EXPECT_EQ(b.raw.get(9), b.x.get(6)) << "inside";
    }
  }
}

} // namespace
