// softmax in the interpreter against its double reference: n_cols not a power of two (masked
// lanes), several rows, padded row strides, f32/f16/bf16; outputs poisoned with NaN.
#include "kernels/compare.h"
#include "kernels/softmax/softmax.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace kiln;

namespace {

struct SoftmaxCase {
  int64_t rows, cols;
  DType dtype;
  int64_t row_pad; // extra elements between rows of the input and output
};

void PrintTo(const SoftmaxCase& c, std::ostream* os) {
  *os << c.rows << " rows of " << c.cols << " " << dtype_name(c.dtype) << ", row padding " << c.row_pad;
}

class SoftmaxInterp : public ::testing::TestWithParam<SoftmaxCase> {};

TEST_P(SoftmaxInterp, MatchesReference) {
  const SoftmaxCase& tc = GetParam();
  SoftmaxProblem p;
  p.n_rows = tc.rows;
  p.n_cols = tc.cols;
  p.dtype = tc.dtype;
  p.in_row_stride = tc.cols + tc.row_pad;
  p.out_row_stride = tc.cols + 2 * tc.row_pad;
  const uint64_t seed = 7 + static_cast<uint64_t>(tc.rows * 1000 + tc.cols * 3 + tc.row_pad);
  HostBuffer in = make_softmax_input(p, seed, 8.0);
  std::vector<double> ref = softmax_reference(p, in);
  // One row a program, and several (the last program's extra rows masked off when ROWS does not divide).
  for (int64_t rows_per_program : {1, 2, 4}) {
    Config config = softmax_config(p);
    config.set("ROWS", rows_per_program);
    std::vector<double> out = run_softmax_interpreted(p, config, in);
    Comparison cmp = compare_to_reference(out, ref);
    EXPECT_TRUE(cmp.ok(tolerance(p.dtype))) << "ROWS=" << rows_per_program << ": " << cmp.str() << " tolerance "
                                            << tolerance(p.dtype);
    for (int64_t r = 0; r < p.n_rows; ++r) { // each row sums to 1 up to the output rounding
      double s = 0;
      for (int64_t c = 0; c < p.n_cols; ++c)
        s += out[static_cast<size_t>(r * p.n_cols + c)];
      EXPECT_NEAR(s, 1.0, 4 * p.n_cols * unit_roundoff(p.dtype) + 1e-6) << "ROWS=" << rows_per_program << " row " << r;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(softmax, SoftmaxInterp,
                         ::testing::Values(SoftmaxCase{1, 1, f32, 0}, SoftmaxCase{5, 100, f32, 0},
                                           SoftmaxCase{3, 781, f32, 5}, SoftmaxCase{4, 128, f32, 0},
                                           SoftmaxCase{7, 100, f16, 3}, SoftmaxCase{2, 1000, f16, 0},
                                           SoftmaxCase{3, 257, bf16, 1}),
                         [](const auto& info) {
                           const SoftmaxCase& c = info.param;
                           return "rows" + std::to_string(c.rows) + "_cols" + std::to_string(c.cols) + "_" +
                                  std::string(dtype_name(c.dtype)) + (c.row_pad ? "_padded" : "");
                         });

TEST(SoftmaxInterp, BlockSmallerThanRowIsAnError) {
  SoftmaxProblem p;
  p.n_rows = 2;
  p.n_cols = 300;
  Config c = softmax_config(p);
  c.set("BLOCK", 256);
  try {
    softmax_def().grid(c, {{"n_rows", 2}, {"n_cols", 300}});
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("BLOCK=256 is smaller than n_cols=300"), std::string::npos) << e.what();
  }
}

} // namespace
