// The interpreter, op by op: dtype rounding, integer semantics, shapes, reductions, dot, control flow, and
// the errors a bad kernel or launch must raise (memory access: interpreter_memory_test.cpp).
#include "dsl/dsl.h"
#include "dsl/interpreter.h"
#include "kernels/vector_add/vector_add.h"
#include "support/half.h"
#include "unit/interpreter_test_support.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <limits>

using namespace kiln;
using namespace kiln::testing_support;

namespace {

double round_f16(double x) { return f16_bits_to_float(float_to_f16_bits(static_cast<float>(x))); }
double round_bf16(double x) { return bf16_bits_to_float(float_to_bf16_bits(static_cast<float>(x))); }

TEST(Interpreter, F16RoundsOnCastAndStore) {
  Kernel k = unary_kernel(f32, f16, 64, [](Value v) { return v.to(f16); });
  HostBuffer x = random_floats(f32, 64, "x", 11);
  x.set(0, 1.0 / 3.0);
  x.set(1, 70000.0); // beyond f16's range: inf
  HostBuffer y = poisoned(f16, 64, "y");
  interpret(k, kOne, {InterpArg::ptr(x), InterpArg::ptr(y)});
  EXPECT_EQ(y.get(0), 0.333251953125);
  EXPECT_TRUE(std::isinf(y.get(1)));
  for (int64_t i = 2; i < 64; ++i)
    EXPECT_EQ(y.get(i), round_f16(x.get(i))) << i;
}

TEST(Interpreter, F16ArithmeticRoundsEveryResult) {
  KernelBuilder kb("f16_math");
  Value a = kb.arg_ptr("a", f16), b = kb.arg_ptr("b", f16), out = kb.arg_ptr("out", f16);
  Value offs = arange(0, 64);
  Value va = load(a + offs), vb = load(b + offs);
  store(out + offs, (va + vb) * va);
  Kernel k = kb.finish();
  HostBuffer ha = random_floats(f16, 64, "a", 12), hb = random_floats(f16, 64, "b", 13);
  HostBuffer ho = poisoned(f16, 64, "out");
  interpret(k, kOne, {InterpArg::ptr(ha), InterpArg::ptr(hb), InterpArg::ptr(ho)});
  for (int64_t i = 0; i < 64; ++i)
    EXPECT_EQ(ho.get(i), round_f16(round_f16(ha.get(i) + hb.get(i)) * ha.get(i))) << i;
}

TEST(Interpreter, Bf16RoundsOnCast) {
  Kernel k = unary_kernel(f32, bf16, 32, [](Value v) { return v.to(bf16); });
  HostBuffer x = random_floats(f32, 32, "x", 14, -100, 100);
  x.set(0, 1.0 / 3.0);
  HostBuffer y = poisoned(bf16, 32, "y");
  interpret(k, kOne, {InterpArg::ptr(x), InterpArg::ptr(y)});
  EXPECT_EQ(y.get(0), 0.333984375); // 1/3 to 8 significant bits
  for (int64_t i = 0; i < 32; ++i)
    EXPECT_EQ(y.get(i), round_bf16(x.get(i))) << i;
}

TEST(Interpreter, F32ArithmeticRoundsToFloat) {
  Kernel k = unary_kernel(f32, f32, 32, [](Value v) { return v / 3.0f + exp(v); });
  HostBuffer x = random_floats(f32, 32, "x", 15);
  HostBuffer y = poisoned(f32, 32, "y");
  interpret(k, kOne, {InterpArg::ptr(x), InterpArg::ptr(y)});
  for (int64_t i = 0; i < 32; ++i) {
    float v = static_cast<float>(x.get(i));
    float want = v / 3.0f + static_cast<float>(std::exp(static_cast<double>(v)));
    EXPECT_EQ(y.get(i), static_cast<double>(want)) << i;
  }
}

TEST(Interpreter, CastsTruncateAndWrap) {
  Kernel to_int = unary_kernel(f32, i32, 8, [](Value v) { return v.to(i32); });
  HostBuffer x(f32, 8, "x");
  const double in[8] = {2.7, -2.7, 0.5, -0.5, 1e10, -1e10, kNaN, 7};
  const int64_t want[8] = {2, -2, 0, 0, 1410065408, -1410065408, 0, 7}; // 1e10 wraps through i64
  for (int i = 0; i < 8; ++i)
    x.set(i, in[i]);
  HostBuffer y = poisoned(i32, 8, "y");
  interpret(to_int, kOne, {InterpArg::ptr(x), InterpArg::ptr(y)});
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(y.get_int(i), want[i]) << in[i];

  Kernel to_u8 = unary_kernel(i32, u8, 4, [](Value v) { return v.to(u8); });
  HostBuffer xi(i32, 4, "xi"), yu = poisoned(u8, 4, "yu");
  const int64_t ints[4] = {3, 256, -1, 511};
  for (int i = 0; i < 4; ++i)
    xi.set_int(i, ints[i]);
  interpret(to_u8, kOne, {InterpArg::ptr(xi), InterpArg::ptr(yu)});
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(yu.get_int(i), ints[i] & 0xff);
}

TEST(Interpreter, IntegerDivisionTruncatesTowardZero) {
  KernelBuilder kb("divrem");
  Value a = kb.arg_ptr("a", i32), b = kb.arg_ptr("b", i32), q = kb.arg_ptr("q", i32),
        r = kb.arg_ptr("r", i32);
  Value offs = arange(0, 64);
  Value va = load(a + offs), vb = load(b + offs);
  store(q + offs, va / vb);
  store(r + offs, va % vb);
  Kernel k = kb.finish();
  HostBuffer ha = random_ints(i32, 64, "a", 16, -1000, 1000), hb = random_ints(i32, 64, "b", 17, 1, 37);
  for (int64_t i = 0; i < 64; i += 2)
    hb.set_int(i, -hb.get_int(i)); // negative divisors too
  ha.set_int(0, -7), hb.set_int(0, 2);
  HostBuffer hq = poisoned(i32, 64, "q"), hr = poisoned(i32, 64, "r");
  interpret(k, kOne, {InterpArg::ptr(ha), InterpArg::ptr(hb), InterpArg::ptr(hq), InterpArg::ptr(hr)});
  EXPECT_EQ(hq.get_int(0), -3);
  EXPECT_EQ(hr.get_int(0), -1);
  for (int64_t i = 0; i < 64; ++i) {
    int32_t x = static_cast<int32_t>(ha.get_int(i)), y = static_cast<int32_t>(hb.get_int(i));
    EXPECT_EQ(hq.get_int(i), x / y) << x << " / " << y;
    EXPECT_EQ(hr.get_int(i), x % y) << x << " % " << y;
  }
}

TEST(Interpreter, I64ArithmeticIsExactBeyond2To53) {
  Kernel k = unary_kernel(i64, i64, 4, [](Value v) { return v * 3 + 1; });
  HostBuffer x(i64, 4, "x"), y = poisoned(i64, 4, "y");
  const int64_t big = (int64_t{1} << 53) + 1;
  for (int i = 0; i < 4; ++i)
    x.set_int(i, big + i);
  interpret(k, kOne, {InterpArg::ptr(x), InterpArg::ptr(y)});
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(y.get_int(i), (big + i) * 3 + 1);
}

TEST(Interpreter, I32ArithmeticWraps) {
  Kernel k = unary_kernel(i32, i32, 2, [](Value v) { return v + 1; });
  HostBuffer x(i32, 2, "x"), y = poisoned(i32, 2, "y");
  x.set_int(0, 2147483647);
  x.set_int(1, -5);
  interpret(k, kOne, {InterpArg::ptr(x), InterpArg::ptr(y)});
  EXPECT_EQ(y.get_int(0), -2147483648LL);
  EXPECT_EQ(y.get_int(1), -4);
}

TEST(Interpreter, ComparisonsAndWhere) {
  KernelBuilder kb("cmp");
  Value a = kb.arg_ptr("a", f32), b = kb.arg_ptr("b", f32), w = kb.arg_ptr("w", f32),
        c = kb.arg_ptr("c", i32);
  Value offs = arange(0, 32);
  Value va = load(a + offs), vb = load(b + offs);
  store(w + offs, where(va < vb, va, vb * 2.0f));
  // Bit-packed comparison results: lt | le<<1 | gt<<2 | ge<<3 | eq<<4 | ne<<5 | (lt && ne)<<6.
  Value bits = (va < vb).to(i32) + (va <= vb).to(i32) * 2 + (va > vb).to(i32) * 4 + (va >= vb).to(i32) * 8 +
               (va == vb).to(i32) * 16 + (va != vb).to(i32) * 32 + ((va < vb) && (va != vb)).to(i32) * 64;
  store(c + offs, bits);
  Kernel k = kb.finish();
  HostBuffer ha = random_floats(f32, 32, "a", 18), hb = random_floats(f32, 32, "b", 19);
  hb.set(0, ha.get(0));
  hb.set(1, kNaN);
  HostBuffer hw = poisoned(f32, 32, "w"), hc = poisoned(i32, 32, "c");
  interpret(k, kOne, {InterpArg::ptr(ha), InterpArg::ptr(hb), InterpArg::ptr(hw), InterpArg::ptr(hc)});
  for (int64_t i = 0; i < 32; ++i) {
    double x = ha.get(i), y = hb.get(i);
    int64_t want = (x < y) + (x <= y) * 2 + (x > y) * 4 + (x >= y) * 8 + (x == y) * 16 + (x != y) * 32 +
                   (x < y && x != y) * 64;
    EXPECT_EQ(hc.get_int(i), want) << x << " vs " << y;
    double w_want = x < y ? x : static_cast<double>(static_cast<float>(y * 2));
    if (std::isnan(w_want))
      EXPECT_TRUE(std::isnan(hw.get(i)));
    else
      EXPECT_EQ(hw.get(i), w_want) << i;
  }
  EXPECT_EQ(hc.get_int(0), 2 + 8 + 16);
  EXPECT_EQ(hc.get_int(1), 32); // NaN: only != holds
}

TEST(Interpreter, ShapesBroadcastExpandTransReshape) {
  KernelBuilder kb("shapes");
  Value x = kb.arg_ptr("x", f32), row = kb.arg_ptr("row", f32);
  Value t = kb.arg_ptr("t", f32), r = kb.arg_ptr("r", f32), s = kb.arg_ptr("s", f32);
  Value tile = load(x + tile_offsets(4, 8, 8));               // (4, 8)
  Value rv = load(row + arange(0, 8)).expand_dims(0);         // (1, 8)
  store(s + tile_offsets(4, 8, 8), tile + rv);                // row broadcast down the rows
  store(t + tile_offsets(8, 4, 4), trans(tile));              // (8, 4)
  store(r + tile_offsets(2, 16, 16), reshape(tile, {2, 16})); // row-major reinterpretation
  Kernel k = kb.finish();
  HostBuffer hx = random_floats(f32, 32, "x", 20), hrow = random_floats(f32, 8, "row", 21);
  HostBuffer ht = poisoned(f32, 32, "t"), hr = poisoned(f32, 32, "r"), hs = poisoned(f32, 32, "s");
  interpret(
      k, kOne,
      {InterpArg::ptr(hx), InterpArg::ptr(hrow), InterpArg::ptr(ht), InterpArg::ptr(hr), InterpArg::ptr(hs)});
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 8; ++j) {
      EXPECT_EQ(ht.get(j * 4 + i), hx.get(i * 8 + j));
      EXPECT_EQ(hs.get(i * 8 + j), static_cast<double>(static_cast<float>(hx.get(i * 8 + j) + hrow.get(j))));
    }
  for (int i = 0; i < 32; ++i)
    EXPECT_EQ(hr.get(i), hx.get(i));
}

TEST(Interpreter, ScalarSplatAndColumnBroadcast) {
  KernelBuilder kb("splat");
  Value out = kb.arg_ptr("out", i32);
  Value col = arange(0, 4).expand_dims(1);         // (4, 1)
  Value grid = broadcast_to(col, {4, 8}) * 10 + 7; // scalar 10 and 7 splat
  store(out + tile_offsets(4, 8, 8), grid);
  Kernel k = kb.finish();
  HostBuffer ho = poisoned(i32, 32, "out");
  interpret(k, kOne, {InterpArg::ptr(ho)});
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 8; ++j)
      EXPECT_EQ(ho.get_int(i * 8 + j), i * 10 + 7);
}

TEST(Interpreter, Reductions) {
  const int R = 4, C = 8;
  KernelBuilder kb("reduce");
  Value x = kb.arg_ptr("x", f32);
  Value s0 = kb.arg_ptr("sum0", f32), s1 = kb.arg_ptr("sum1", f32), mx = kb.arg_ptr("max1", f32);
  Value mn = kb.arg_ptr("min0", f32), am = kb.arg_ptr("argmax1", i32), kd = kb.arg_ptr("keep", f32);
  Value tile = load(x + tile_offsets(R, C, C));           // (4, 8)
  store(s0 + arange(0, C), sum(tile, 0));                 // (8,)
  store(s1 + arange(0, R), sum(tile, 1));                 // (4,)
  store(mx + arange(0, R), max(tile, 1));                 // (4,)
  store(mn + arange(0, C), min(tile, 0));                 // (8,)
  store(am + arange(0, R), argmax(tile, 1));              // (4,)
  Value centred = tile - max(tile, 1, /*keepdims=*/true); // (4, 8) - (4, 1)
  store(kd + tile_offsets(R, C, C), centred);
  Kernel k = kb.finish();
  HostBuffer hx = random_floats(f32, R * C, "x", 22);
  hx.set(1 * C + 5, 9.0), hx.set(1 * C + 6, 9.0); // a tie: argmax takes the first
  HostBuffer h[6] = {poisoned(f32, C, "sum0"), poisoned(f32, R, "sum1"),    poisoned(f32, R, "max1"),
                     poisoned(f32, C, "min0"), poisoned(i32, R, "argmax1"), poisoned(f32, R * C, "keep")};
  interpret(k, kOne,
            {InterpArg::ptr(hx), InterpArg::ptr(h[0]), InterpArg::ptr(h[1]), InterpArg::ptr(h[2]),
             InterpArg::ptr(h[3]), InterpArg::ptr(h[4]), InterpArg::ptr(h[5])});
  auto at = [&](int i, int j) { return hx.get(i * C + j); };
  for (int j = 0; j < C; ++j) {
    double s = 0, m = at(0, j);
    for (int i = 0; i < R; ++i)
      s += at(i, j), m = std::min(m, at(i, j));
    EXPECT_EQ(h[0].get(j), static_cast<double>(static_cast<float>(s)));
    EXPECT_EQ(h[3].get(j), m);
  }
  for (int i = 0; i < R; ++i) {
    double s = 0, m = at(i, 0);
    int arg = 0;
    for (int j = 0; j < C; ++j) {
      s += at(i, j);
      if (at(i, j) > m)
        m = at(i, j), arg = j;
    }
    EXPECT_EQ(h[1].get(i), static_cast<double>(static_cast<float>(s)));
    EXPECT_EQ(h[2].get(i), m);
    EXPECT_EQ(h[4].get_int(i), arg);
    for (int j = 0; j < C; ++j)
      EXPECT_EQ(h[5].get(i * C + j), static_cast<double>(static_cast<float>(at(i, j) - m)));
  }
  EXPECT_EQ(h[4].get_int(1), 5);
}

TEST(Interpreter, MaxMinIgnoreNaNUnlessAllAreNaN) {
  KernelBuilder kb("nan_reduce");
  Value x = kb.arg_ptr("x", f32), mx = kb.arg_ptr("mx", f32), mn = kb.arg_ptr("mn", f32);
  Value am = kb.arg_ptr("am", i32), em = kb.arg_ptr("em", f32);
  Value tile = load(x + tile_offsets(2, 4, 4)); // (2, 4)
  store(mx + arange(0, 2), max(tile, 1));
  store(mn + arange(0, 2), min(tile, 1));
  store(am + arange(0, 2), argmax(tile, 1));
  store(em + tile_offsets(2, 4, 4), maximum(tile, 0.5f)); // elementwise: NaN loses too
  Kernel k = kb.finish();
  HostBuffer hx(f32, 8, "x");
  const double in[8] = {kNaN, 3, -1, kNaN, kNaN, kNaN, kNaN, kNaN};
  for (int i = 0; i < 8; ++i)
    hx.set(i, in[i]);
  HostBuffer hmx = poisoned(f32, 2, "mx"), hmn = poisoned(f32, 2, "mn"), ham = poisoned(i32, 2, "am");
  HostBuffer hem = poisoned(f32, 8, "em");
  interpret(k, kOne,
            {InterpArg::ptr(hx), InterpArg::ptr(hmx), InterpArg::ptr(hmn), InterpArg::ptr(ham),
             InterpArg::ptr(hem)});
  EXPECT_EQ(hmx.get(0), 3);
  EXPECT_EQ(hmn.get(0), -1);
  EXPECT_EQ(ham.get_int(0), 1);
  EXPECT_TRUE(std::isnan(hmx.get(1)));
  EXPECT_TRUE(std::isnan(hmn.get(1)));
  EXPECT_EQ(ham.get_int(1), 0);
  EXPECT_EQ(hem.get(0), 0.5);
  EXPECT_EQ(hem.get(1), 3);
  EXPECT_EQ(hem.get(2), 0.5);
}

TEST(Interpreter, DotF16AccumulatesInF32) {
  const int M = 32, N = 16, K = 16;
  KernelBuilder kb("dot");
  Value a = kb.arg_ptr("a", f16), b = kb.arg_ptr("b", f16), c = kb.arg_ptr("c", f32),
        out = kb.arg_ptr("out", f32);
  Value va = load(a + tile_offsets(M, K, K));           // (M, K) f16
  Value vb = load(b + tile_offsets(K, N, N));           // (K, N) f16
  Value acc = load(c + tile_offsets(M, N, N));          // (M, N) f32
  store(out + tile_offsets(M, N, N), dot(va, vb, acc)); // (M, N) f32
  Kernel k = kb.finish();
  HostBuffer ha = random_ints(f16, M * K, "a", 23, -8, 8), hb = random_ints(f16, K * N, "b", 24, -8, 8);
  HostBuffer hc = random_ints(f32, M * N, "c", 25, -100, 100), ho = poisoned(f32, M * N, "out");
  interpret(k, kOne, {InterpArg::ptr(ha), InterpArg::ptr(hb), InterpArg::ptr(hc), InterpArg::ptr(ho)});
  for (int i = 0; i < M; ++i)
    for (int j = 0; j < N; ++j) {
      double want = hc.get(i * N + j);
      for (int kk = 0; kk < K; ++kk)
        want += ha.get(i * K + kk) * hb.get(kk * N + j);
      EXPECT_EQ(ho.get(i * N + j), want) << i << "," << j;
    }
}

TEST(Interpreter, DotTf32RoundsOperands) {
  const int S = 16;
  KernelBuilder kb("dot_tf32");
  Value a = kb.arg_ptr("a", f32), b = kb.arg_ptr("b", f32), exact = kb.arg_ptr("exact", f32),
        tf = kb.arg_ptr("tf", f32);
  Value va = load(a + tile_offsets(S, S, S)), vb = load(b + tile_offsets(S, S, S));
  store(exact + tile_offsets(S, S, S), dot(va, vb));
  store(tf + tile_offsets(S, S, S), dot(va, vb, zeros({S, S}, f32), /*tf32=*/true));
  Kernel k = kb.finish();
  HostBuffer ha(f32, S * S, "a"), hb(f32, S * S, "b");
  for (int i = 0; i < S * S; ++i) {
    ha.set(i, 1.0 + std::ldexp(1.0, -12)); // below tf32's 10-bit mantissa: rounds to 1
    hb.set(i, 1.0);
  }
  HostBuffer he = poisoned(f32, S * S, "exact"), ht = poisoned(f32, S * S, "tf");
  interpret(k, kOne, {InterpArg::ptr(ha), InterpArg::ptr(hb), InterpArg::ptr(he), InterpArg::ptr(ht)});
  EXPECT_EQ(ht.get(0), 16.0);
  EXPECT_EQ(he.get(0), 16.0 * (1.0 + std::ldexp(1.0, -12)));
}

TEST(Interpreter, ForLoopCarriesValues) {
  KernelBuilder kb("loop");
  Value out = kb.arg_ptr("out", i32), n = kb.arg("n", i32);
  Value total = scalar(0, i32), evens = scalar(0, i32);
  for_range(0, n, 1, [&](Value i) { total = total + i; });
  for_range(0, n, 2, [&](Value) { evens = evens + 1; });
  store(out, total);
  store(out + 1, evens);
  Kernel k = kb.finish();
  for (int64_t count : {0, 1, 37}) {
    HostBuffer ho = poisoned(i32, 2, "out");
    interpret(k, kOne, {InterpArg::ptr(ho), InterpArg::of_int(count)});
    EXPECT_EQ(ho.get_int(0), count * (count - 1) / 2);
    EXPECT_EQ(ho.get_int(1), (count + 1) / 2);
  }
}

TEST(Interpreter, ForLoopStepMustBePositive) {
  KernelBuilder kb("bad_step");
  Value out = kb.arg_ptr("out", i32), step = kb.arg("step", i32);
  Value total = scalar(0, i32);
  for_range(0, 10, step, [&](Value i) { total = total + i; });
  store(out, total);
  Kernel k = kb.finish();
  HostBuffer ho = poisoned(i32, 1, "out");
  try {
    interpret(k, kOne, {InterpArg::ptr(ho), InterpArg::of_int(0)});
    FAIL() << "a zero step must fail";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("for_range step must be positive, got 0"), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("interpreter_test.cpp:"), std::string::npos) << e.what();
  }
}

TEST(Interpreter, IfTakesOneBranch) {
  KernelBuilder kb("branch");
  Value out = kb.arg_ptr("out", f32), n = kb.arg("n", i32);
  Value v = full({4}, 10, f32);
  if_(
      n > 4, [&] { v = v + 1.0f; }, [&] { v = v - 1.0f; });
  store(out + arange(0, 4), v);
  Kernel k = kb.finish();
  for (int64_t count : {3, 4, 5, 100}) {
    HostBuffer ho = poisoned(f32, 4, "out");
    interpret(k, kOne, {InterpArg::ptr(ho), InterpArg::of_int(count)});
    for (int i = 0; i < 4; ++i)
      EXPECT_EQ(ho.get(i), count > 4 ? 11 : 9) << count;
  }
}

TEST(Interpreter, VectorAddMatchesReference) {
  const int64_t n = 1000, block = 256; // n is not a multiple of BLOCK
  Kernel k = build_vector_add(Config().set("BLOCK", block));
  HostBuffer x = random_floats(f32, n, "x", 30), y = random_floats(f32, n, "y", 31),
             out = poisoned(f32, n, "out");
  interpret(k, Grid{(n + block - 1) / block, 1, 1},
            {InterpArg::ptr(x), InterpArg::ptr(y), InterpArg::ptr(out), InterpArg::of_int(n)});
  std::vector<float> want(n);
  vector_add_reference(x.data<float>(), y.data<float>(), want.data(), n);
  for (int64_t i = 0; i < n; ++i)
    EXPECT_EQ(out.data<float>()[i], want[i]) << i;
}

// ---- errors ----

TEST(Interpreter, WrongArgumentsNameTheParameter) {
  Kernel k = build_vector_add(Config().set("BLOCK", 16));
  HostBuffer x(f32, 16, "x"), y(f32, 16, "y"), out(f32, 16, "out"), halves(f16, 16, "halves");
  std::string count = error_of([&] { interpret(k, kOne, {InterpArg::ptr(x), InterpArg::ptr(y)}); });
  EXPECT_NE(count.find("takes 4 arguments (x, y, out, n), got 2"), std::string::npos) << count;

  std::string scalar_for_ptr = error_of([&] {
    interpret(k, kOne, {InterpArg::ptr(x), InterpArg::of_int(3), InterpArg::ptr(out), InterpArg::of_int(16)});
  });
  EXPECT_NE(scalar_for_ptr.find("argument 'y'"), std::string::npos) << scalar_for_ptr;

  std::string ptr_for_scalar = error_of([&] {
    interpret(k, kOne, {InterpArg::ptr(x), InterpArg::ptr(y), InterpArg::ptr(out), InterpArg::ptr(x)});
  });
  EXPECT_NE(ptr_for_scalar.find("argument 'n'"), std::string::npos) << ptr_for_scalar;

  std::string wrong_dtype = error_of([&] {
    interpret(k, kOne, {InterpArg::ptr(x), InterpArg::ptr(y), InterpArg::ptr(halves), InterpArg::of_int(16)});
  });
  EXPECT_NE(wrong_dtype.find("argument 'out'"), std::string::npos) << wrong_dtype;
  EXPECT_NE(wrong_dtype.find("f16"), std::string::npos) << wrong_dtype;

  std::string fraction = error_of([&] {
    interpret(k, kOne, {InterpArg::ptr(x), InterpArg::ptr(y), InterpArg::ptr(out), InterpArg::of_float(2.5)});
  });
  EXPECT_NE(fraction.find("argument 'n'"), std::string::npos) << fraction;

  std::string grid = error_of([&] {
    interpret(k, Grid{0, 1, 1},
              {InterpArg::ptr(x), InterpArg::ptr(y), InterpArg::ptr(out), InterpArg::of_int(16)});
  });
  EXPECT_NE(grid.find("grid must be at least 1"), std::string::npos) << grid;
}

TEST(Interpreter, IntegerDivisionByZeroIsAnError) {
  KernelBuilder kb("div0");
  Value a = kb.arg_ptr("a", i32), d = kb.arg("d", i32);
  Value offs = arange(0, 4);
  store(a + offs, load(a + offs) / d);
  Kernel k = kb.finish();
  HostBuffer ha = random_ints(i32, 4, "a", 35, 1, 9);
  std::string msg = error_of([&] { interpret(k, kOne, {InterpArg::ptr(ha), InterpArg::of_int(0)}); });
  EXPECT_NE(msg.find("division by zero"), std::string::npos) << msg;
  EXPECT_NE(msg.find("interpreter_test.cpp:"), std::string::npos) << msg;
}

TEST(Interpreter, FloatDivisionByZeroFollowsIeee) {
  Kernel k = unary_kernel(f32, f32, 4, [](Value v) { return v / 0.0f; });
  HostBuffer x(f32, 4, "x"), y = poisoned(f32, 4, "y");
  x.set(0, 1), x.set(1, -2), x.set(2, 0), x.set(3, 3);
  interpret(k, kOne, {InterpArg::ptr(x), InterpArg::ptr(y)});
  EXPECT_EQ(y.get(0), std::numeric_limits<double>::infinity());
  EXPECT_EQ(y.get(1), -std::numeric_limits<double>::infinity());
  EXPECT_TRUE(std::isnan(y.get(2)));
}

TEST(Interpreter, InterpretRequestedReadsTheEnvironment) {
  const char* saved = std::getenv("KILN_INTERPRET");
  std::string keep = saved ? saved : "";
  setenv("KILN_INTERPRET", "1", 1);
  EXPECT_TRUE(interpret_requested());
  setenv("KILN_INTERPRET", "true", 1);
  EXPECT_TRUE(interpret_requested());
  setenv("KILN_INTERPRET", "0", 1);
  EXPECT_FALSE(interpret_requested());
  unsetenv("KILN_INTERPRET");
  EXPECT_FALSE(interpret_requested());
  if (saved)
    setenv("KILN_INTERPRET", keep.c_str(), 1);
}

} // namespace
