// .npy reading and writing: round trips in every float width, both byte orders, Fortran order, and the
// clear rejection of truncated, foreign and malformed files (files that are not regular files, and headers
// declaring more data than a file holds: tests/error/file_errors_test.cpp).
#include "support/error.h"
#include "support/half.h"
#include "support/npy.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>

namespace kiln {
namespace {

std::vector<double> random_values(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> d(-3.0, 3.0);
  std::vector<double> v(n);
  for (double& x : v)
    x = d(rng);
  return v;
}

// A hand-built .npy file: header dict `dict`, then `data`.
std::string npy_bytes(const std::string& dict, const std::string& data) {
  std::string header = dict;
  size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(header.size() & 0xff);
  out += static_cast<char>(header.size() >> 8);
  return out + header + data;
}

std::string le_bytes(uint64_t raw, int n) {
  std::string s;
  for (int i = 0; i < n; ++i)
    s += static_cast<char>((raw >> (8 * i)) & 0xff);
  return s;
}
std::string be_bytes(uint64_t raw, int n) {
  std::string s = le_bytes(raw, n);
  return std::string(s.rbegin(), s.rend());
}

class NpyRoundTrip : public ::testing::TestWithParam<DType> {};

TEST_P(NpyRoundTrip, ValuesAndShapeSurvive) {
  const DType t = GetParam();
  const std::vector<int64_t> shape = {2, 3, 5};
  std::vector<double> v = random_values(30, 7 + static_cast<uint64_t>(t));
  NpyArray a = parse_npy(serialize_npy(t, shape, v), "mem");
  EXPECT_EQ(a.shape, shape);
  EXPECT_EQ(a.kind, 'f');
  EXPECT_EQ(a.item_bytes, dtype_bytes(t));
  EXPECT_FALSE(a.fortran_order);
  ASSERT_EQ(a.values.size(), v.size());
  for (size_t i = 0; i < v.size(); ++i)
    EXPECT_EQ(a.values[i], round_exactly_to(v[i], t)) << i;
}

INSTANTIATE_TEST_SUITE_P(Floats, NpyRoundTrip, ::testing::Values(DType::f16, DType::f32, DType::f64));

TEST(Npy, HeaderIsAlignedAndReadable) {
  std::string bytes = serialize_npy(DType::f32, {4}, {1, 2, 3, 4});
  EXPECT_EQ(bytes.substr(0, 6), "\x93NUMPY");
  EXPECT_EQ((bytes.size() - 16) % 64, 0u); // data starts on a 64-byte boundary
  EXPECT_NE(bytes.find("'descr': '<f4'"), std::string::npos);
  EXPECT_NE(bytes.find("'shape': (4,)"), std::string::npos);
}

TEST(Npy, BigEndianIsByteSwapped) {
  std::string data;
  const float vals[] = {1.5f, -2.25f, 1e-3f};
  for (float f : vals)
    data += be_bytes(std::bit_cast<uint32_t>(f), 4);
  NpyArray a = parse_npy(npy_bytes("{'descr': '>f4', 'fortran_order': False, 'shape': (3,), }", data), "be");
  EXPECT_TRUE(a.big_endian);
  ASSERT_EQ(a.values.size(), 3u);
  for (int i = 0; i < 3; ++i)
    EXPECT_EQ(a.values[static_cast<size_t>(i)], static_cast<double>(vals[i]));

  std::string d16 = be_bytes(float_to_f16_bits(0.75f), 2) + be_bytes(float_to_f16_bits(-8.0f), 2);
  NpyArray h = parse_npy(npy_bytes("{'descr': '>f2', 'fortran_order': False, 'shape': (2,), }", d16), "be16");
  EXPECT_EQ(h.values, (std::vector<double>{0.75, -8.0}));
}

TEST(Npy, FortranOrderIsReturnedInCOrder) {
  // C-order [[0, 1, 2], [3, 4, 5]] stored column by column: 0 3 1 4 2 5.
  std::string data;
  for (double v : {0.0, 3.0, 1.0, 4.0, 2.0, 5.0})
    data += le_bytes(std::bit_cast<uint64_t>(v), 8);
  NpyArray a = parse_npy(npy_bytes("{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3), }", data), "f");
  EXPECT_TRUE(a.fortran_order);
  EXPECT_EQ(a.values, (std::vector<double>{0, 1, 2, 3, 4, 5}));
}

TEST(Npy, IntegersAreReadWithTheirKind) {
  std::string data = le_bytes(static_cast<uint32_t>(-7), 4) + le_bytes(9, 4);
  NpyArray a = parse_npy(npy_bytes("{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }", data), "i");
  EXPECT_EQ(a.kind, 'i');
  EXPECT_FALSE(a.is_float());
  EXPECT_EQ(a.dtype_str(), "int32");
  EXPECT_EQ(a.values, (std::vector<double>{-7, 9}));
}

void expect_error(const std::string& bytes, const std::string& substring) {
  try {
    parse_npy(bytes, "bad.npy");
    ADD_FAILURE() << "no error; expected one containing '" << substring << "'";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find(substring), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("bad.npy"), std::string::npos) << e.what();
  }
}

TEST(Npy, MalformedFilesAreClearErrors) {
  std::string good = serialize_npy(DType::f32, {2, 2}, {1, 2, 3, 4});
  expect_error(good.substr(0, good.size() - 3), "truncated");
  expect_error(good.substr(0, 9), "not an .npy file");
  expect_error(good.substr(0, 40), "truncated");
  expect_error(good + "xx", "bytes after its data");
  expect_error("PK\x03\x04 this is a zip file, not npy", "not an .npy file");
  expect_error(npy_bytes("{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }", std::string(8, '\0')),
               "dtype '<c8' is not supported");
  expect_error(npy_bytes("{'descr': '<f4', 'shape': (1,), }", std::string(4, '\0')), "header");
  expect_error(npy_bytes("{'descr': '<f4', 'fortran_order': Maybe, 'shape': (1,), }", std::string(4, '\0')),
               "True or False");
  std::string v9 = good;
  v9[6] = 9;
  expect_error(v9, "version 9");
}

TEST(Npy, SerializeRejectsBf16AndIntegers) {
  EXPECT_THROW(serialize_npy(DType::bf16, {1}, {1.0}), Error);
  EXPECT_THROW(serialize_npy(DType::i32, {1}, {1.0}), Error);
}

TEST(Npy, RoundExactlyToAvoidsDoubleRounding) {
  // Just above the midpoint between 1 and the next f16 (1 + 2^-10): f32 would round it onto the midpoint
  // and f16 then ties to even (1.0); a single rounding gives 1 + 2^-10.
  const double x = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
  EXPECT_EQ(round_to_dtype(x, DType::f16), 1.0); // the double rounding this avoids
  EXPECT_EQ(round_exactly_to(x, DType::f16), 1.0 + std::ldexp(1.0, -10));
  EXPECT_EQ(round_exactly_to(1.0 + std::ldexp(1.0, -11), DType::f16), 1.0); // exact tie: to even
  EXPECT_EQ(round_exactly_to(1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -30), DType::bf16),
            1.0 + std::ldexp(1.0, -7));
  EXPECT_TRUE(std::isinf(round_exactly_to(1e6, DType::f16)));
}

} // namespace
} // namespace kiln
