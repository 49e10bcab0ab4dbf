// kiln's host tensor (dsl/host_buffer.h): elements stored as on the GPU, rounding and wrapping on set,
// exact integers, and the errors a wrong index or a wrong accessor raises.
#include "dsl/host_buffer.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>

using namespace kiln;

namespace {

std::string error_of(void (*fn)()) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(HostBuffer, StoresElementsAsTheGpuDoes) {
  HostBuffer h(DType::f16, 3, "h");
  EXPECT_EQ(h.numel(), 3);
  EXPECT_EQ(h.bytes.size(), 6u);
  h.set(0, 1.0);
  h.set(1, 1.0 / 3);
  h.set(2, 70000.0); // beyond f16's largest finite (65504): inf
  EXPECT_EQ(h.data<uint16_t>()[0], 0x3c00);
  EXPECT_EQ(h.get(1), static_cast<double>(f16_bits_to_float(float_to_f16_bits(1.0f / 3))));
  EXPECT_TRUE(std::isinf(h.get(2)));

  HostBuffer b(DType::bf16, 1);
  b.set(0, 1.0);
  EXPECT_EQ(b.data<uint16_t>()[0], 0x3f80);

  HostBuffer f(DType::f32, 1);
  f.set(0, 0.1);
  EXPECT_EQ(f.get(0), static_cast<double>(0.1f));
  EXPECT_EQ(f.data<float>()[0], 0.1f);
}

TEST(HostBuffer, IntegersAreExactAndWrap) {
  HostBuffer big(DType::i64, 1);
  const int64_t v = (int64_t{1} << 60) + 1; // not a double
  big.set_int(0, v);
  EXPECT_EQ(big.get_int(0), v);

  HostBuffer i32s(DType::i32, 2);
  i32s.set_int(0, (int64_t{1} << 32) + 7); // wrapped to the width
  EXPECT_EQ(i32s.get_int(0), 7);
  i32s.set(1, -2.9); // a double converts as a cast: truncated toward zero
  EXPECT_EQ(i32s.get_int(1), -2);

  HostBuffer bools(DType::i1, 2);
  bools.set_int(0, 5);
  bools.set(1, std::numeric_limits<double>::quiet_NaN()); // anything -> i1 is x != 0
  EXPECT_EQ(bools.bytes[0], 1);
  EXPECT_EQ(bools.get_int(1), 1);
}

TEST(HostBuffer, WrongIndexOrAccessorIsAnError) {
  EXPECT_NE(
      error_of([] { HostBuffer(DType::f32, 4, "q").get(4); }).find("buffer 'q': index 4 is out of bounds"),
      std::string::npos);
  EXPECT_NE(error_of([] { HostBuffer(DType::f32, 4, "q").set(-1, 0); }).find("index -1 is out of bounds"),
            std::string::npos);
  EXPECT_NE(error_of([] { HostBuffer(DType::f16, 1, "o").get_int(0); }).find("holds f16, not integers"),
            std::string::npos);
  EXPECT_NE(error_of([] { HostBuffer(DType::f32, -1, "n"); }).find("element count must be >= 0"),
            std::string::npos);
}

} // namespace
