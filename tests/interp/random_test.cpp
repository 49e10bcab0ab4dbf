// rand / randn (counter-based Philox4x32-10) in the interpreter: the generator against the published known-answer
// vectors (Random123's kat_vectors), every element a function of (seed, offset) alone (tiles and scalars, any
// program), i64 offsets past 2^32 using the counter's high word, and the distributions' first moments.
#include "random_kernel.h"

#include "dsl/interpreter.h"

#include <gtest/gtest.h>

#include <cmath>

// The generator itself, compiled as host code from the text the kernels get (as the interpreter does).
#define KILN_PHILOX_FN inline
#include "codegen/prelude/kiln_philox.cuh"
#undef KILN_PHILOX_FN

using namespace kiln;

namespace {

TEST(Philox, KnownAnswers) {
  struct Kat {
    unsigned c[4], k[2], want[4];
  };
  const Kat kats[] = {
      {{0, 0, 0, 0}, {0, 0}, {0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8}},
      {{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff},
       {0xffffffff, 0xffffffff},
       {0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd}},
      {{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344},
       {0xa4093822, 0x299f31d0},
       {0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1}},
  };
  for (const Kat& t : kats) {
    const PhiloxBlock b = philox4x32_10(t.c[0], t.c[1], t.c[2], t.c[3], t.k[0], t.k[1]);
    EXPECT_EQ(b.x0, t.want[0]);
    EXPECT_EQ(b.x1, t.want[1]);
    EXPECT_EQ(b.x2, t.want[2]);
    EXPECT_EQ(b.x3, t.want[3]);
  }
}

struct Drawn {
  HostBuffer u, n, s;
};

Drawn draw(int64_t programs, int64_t seed, int64_t base) {
  Drawn d{HostBuffer(DType::f32, programs * kiln_test::kRandomTile, "u"),
          HostBuffer(DType::f32, programs * kiln_test::kRandomTile, "n"), HostBuffer(DType::f32, programs, "s")};
  interpret(kiln_test::random_kernel(), Grid{programs, 1, 1},
            {InterpArg::ptr(d.u), InterpArg::ptr(d.n), InterpArg::ptr(d.s), InterpArg::of_int(seed),
             InterpArg::of_int(base)});
  return d;
}

TEST(Rand, EachElementIsTheGeneratorAtItsSeedAndOffset) {
  const int64_t seed = 0x1234567890LL, base = (int64_t{1} << 40) + 3; // both words of seed and offset in use
  const Drawn d = draw(4, seed, base);
  for (int64_t i = 0; i < d.u.numel(); ++i) {
    ASSERT_EQ(d.u.get(i), philox_uniform(seed, base + i)) << i;
    ASSERT_EQ(d.n.get(i), philox_normal(seed, base + i)) << i;
  }
  for (int64_t p = 0; p < d.s.numel(); ++p)
    EXPECT_EQ(d.s.get(p), philox_uniform(seed, p)) << p;
}

TEST(Rand, SameSeedAndOffsetsSameNumbersOtherwiseNot) {
  const Drawn a = draw(2, 7, 0), b = draw(2, 7, 0), other_seed = draw(2, 8, 0), shifted = draw(1, 7, 256);
  int64_t same_seed_equal = 0, other_seed_equal = 0;
  for (int64_t i = 0; i < a.u.numel(); ++i) {
    same_seed_equal += a.u.get(i) == b.u.get(i);
    other_seed_equal += a.u.get(i) == other_seed.u.get(i);
  }
  EXPECT_EQ(same_seed_equal, a.u.numel());
  EXPECT_LT(other_seed_equal, 4);
  // Program 1 at base 0 and program 0 at base 256 draw the same offsets: the numbers follow the offsets, not the
  // program that draws them.
  for (int64_t i = 0; i < kiln_test::kRandomTile; ++i)
    EXPECT_EQ(shifted.u.get(i), a.u.get(kiln_test::kRandomTile + i)) << i;
}

TEST(Rand, UniformInUnitIntervalAndNormalHasUnitVariance) {
  const Drawn d = draw(16, 2024, 0); // 4096 draws
  double sum_u = 0, sum_n = 0, sum_n2 = 0;
  const double count = static_cast<double>(d.u.numel());
  for (int64_t i = 0; i < d.u.numel(); ++i) {
    const double u = d.u.get(i), n = d.n.get(i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    ASSERT_EQ(u, std::ldexp(std::round(std::ldexp(u, 24)), -24)) << "a multiple of 2^-24";
    ASSERT_TRUE(std::isfinite(n));
    sum_u += u, sum_n += n, sum_n2 += n * n;
  }
  // Standard errors at 4096 draws: 0.0045 for the uniform mean, 0.016 for the normal mean, 0.022 for its variance;
  // the bounds are about five of them.
  EXPECT_NEAR(sum_u / count, 0.5, 0.025);
  EXPECT_NEAR(sum_n / count, 0.0, 0.08);
  EXPECT_NEAR(sum_n2 / count - (sum_n / count) * (sum_n / count), 1.0, 0.11);
}

} // namespace
