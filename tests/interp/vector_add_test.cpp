// vector_add in the interpreter against its reference: n not a multiple of BLOCK, every element
// written exactly once (outputs poisoned with NaN; the masked tail must not write past n).
#include "dsl/interpreter.h"
#include "kernels/vector_add/vector_add.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

using namespace kiln;

namespace {

class VectorAddInterp : public ::testing::TestWithParam<int64_t> {};

TEST_P(VectorAddInterp, MatchesReference) {
  const int64_t n = GetParam();
  const KernelDef def = vector_add_def();
  Config c = def.default_config();
  c.set("BLOCK", 256);
  std::mt19937_64 rng(1000 + static_cast<uint64_t>(n));
  std::uniform_real_distribution<float> dist(-10.0f, 10.0f);
  HostBuffer x(f32, n, "x"), y(f32, n, "y"), out(f32, n + 7, "out"); // 7 guard elements past n
  for (int64_t i = 0; i < n; ++i) {
    x.data<float>()[i] = dist(rng);
    y.data<float>()[i] = dist(rng);
  }
  for (int64_t i = 0; i < out.numel(); ++i)
    out.data<float>()[i] = std::nanf("");
  std::vector<float> ref(static_cast<size_t>(n));
  vector_add_reference(x.data<float>(), y.data<float>(), ref.data(), n);

  interpret(build_vector_add(c), def.grid(c, {{"n", n}}),
            {InterpArg::ptr(x), InterpArg::ptr(y), InterpArg::ptr(out), InterpArg::of_int(n)});
  for (int64_t i = 0; i < n; ++i)
    ASSERT_EQ(out.data<float>()[i], ref[static_cast<size_t>(i)]) << "element " << i; // f32 add: exact
  for (int64_t i = n; i < out.numel(); ++i)
    EXPECT_TRUE(std::isnan(out.data<float>()[i])) << "the masked tail wrote element " << i;
}

INSTANTIATE_TEST_SUITE_P(vector_add, VectorAddInterp, ::testing::Values(1, 255, 256, 1000, 1537),
                         [](const auto& info) { return "n" + std::to_string(info.param); });

} // namespace
