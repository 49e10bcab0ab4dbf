// The interpreter's memory access: masked loads take `other` and masked stores skip their lanes, block
// pointers pad and skip outside boundary-checked dims and move with advance, atomic adds (through pointers and
// block pointers) accumulate in program order, and an access outside a buffer is an error naming the op, the
// buffer and the element (dsl/interpreter_memory.cpp).
#include "dsl/dsl.h"
#include "dsl/interpreter.h"
#include "block_atomic_add_kernel.h"
#include "unit/interpreter_test_support.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <tuple>

using namespace kiln;
using namespace kiln::testing_support;

namespace {

TEST(Interpreter, MaskedLoadTakesOtherAndMaskedStoreSkips) {
  KernelBuilder kb("masked");
  Value x = kb.arg_ptr("x", f32), y = kb.arg_ptr("y", f32), n = kb.arg("n", i32);
  Value offs = arange(0, 16);
  Value v = load(x + offs, offs < n, -7.5f); // lanes >= n read nothing
  store(y + offs, v, (offs % 2) == 0);       // odd lanes are not written
  Kernel k = kb.finish();
  HostBuffer hx = random_floats(f32, 10, "x", 26); // shorter than the tile: lanes 10.. would be out of bounds
  HostBuffer hy = poisoned(f32, 16, "y");
  interpret(k, kOne, {InterpArg::ptr(hx), InterpArg::ptr(hy), InterpArg::of_int(10)});
  for (int i = 0; i < 16; ++i) {
    if (i % 2)
      EXPECT_TRUE(std::isnan(hy.get(i))) << "masked-off lane " << i << " was written";
    else
      EXPECT_EQ(hy.get(i), i < 10 ? hx.get(i) : -7.5) << i;
  }
}

TEST(Interpreter, BlockPointerBoundaryCheckPadsZeroAndNaN) {
  const int R = 5, C = 6; // a (5, 6) tensor read as (8, 8) blocks
  KernelBuilder kb("block_load");
  Value x = kb.arg_ptr("x", f32), zo = kb.arg_ptr("zero_out", f32), no = kb.arg_ptr("nan_out", f32);
  Value bp = make_block_ptr(x, {R, C}, {C, 1}, {0, 0}, {8, 8}, {1, 0});
  store(zo + tile_offsets(8, 8, 8), load(bp, {0, 1}, Padding::Zero));
  store(no + tile_offsets(8, 8, 8), load(bp, {0, 1}, Padding::NaN));
  Kernel k = kb.finish();
  HostBuffer hx = random_floats(f32, R * C, "x", 27, 1, 2);
  HostBuffer hz = poisoned(f32, 64, "zero_out"), hn = poisoned(f32, 64, "nan_out");
  interpret(k, kOne, {InterpArg::ptr(hx), InterpArg::ptr(hz), InterpArg::ptr(hn)});
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j) {
      bool inside = i < R && j < C;
      EXPECT_EQ(hz.get(i * 8 + j), inside ? hx.get(i * C + j) : 0.0) << i << "," << j;
      if (inside)
        EXPECT_EQ(hn.get(i * 8 + j), hx.get(i * C + j));
      else
        EXPECT_TRUE(std::isnan(hn.get(i * 8 + j))) << i << "," << j;
    }
}

TEST(Interpreter, BlockPointerAdvanceAndCheckedStore) {
  // Reads the (4, 4) block at (1, 2) of an (8, 8) tensor (through advance) and stores it, through a
  // boundary-checked block pointer, into the (3, 3) top-left corner of a poisoned (8, 8) buffer.
  KernelBuilder kb("block_advance");
  Value x = kb.arg_ptr("x", f32), y = kb.arg_ptr("y", f32);
  Value src = make_block_ptr(x, {8, 8}, {8, 1}, {0, 0}, {4, 4}, {1, 0});
  src = advance(src, {1, 2});
  Value dst = make_block_ptr(y, {3, 3}, {8, 1}, {0, 0}, {4, 4}, {1, 0});
  store(dst, load(src), BoundaryCheck{0, 1});
  Kernel k = kb.finish();
  HostBuffer hx = random_floats(f32, 64, "x", 28), hy = poisoned(f32, 64, "y");
  interpret(k, kOne, {InterpArg::ptr(hx), InterpArg::ptr(hy)});
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j) {
      if (i < 3 && j < 3)
        EXPECT_EQ(hy.get(i * 8 + j), hx.get((i + 1) * 8 + j + 2)) << i << "," << j;
      else
        EXPECT_TRUE(std::isnan(hy.get(i * 8 + j)))
            << "checked-out element " << i << "," << j << " was written";
    }
}

TEST(Interpreter, BlockPointerInLoopAccumulatesColumns) {
  // acc (4, 8) sums the (4, 8) blocks of a (4, 32) tensor, advancing along the columns.
  KernelBuilder kb("block_loop");
  Value x = kb.arg_ptr("x", f32), y = kb.arg_ptr("y", f32);
  Value bp = make_block_ptr(x, {4, 32}, {32, 1}, {0, 0}, {4, 8}, {1, 0});
  Value acc = zeros({4, 8}, f32);
  for_range(0, 32, 8, [&](Value) {
    acc = acc + load(bp);
    bp = advance(bp, {0, 8});
  });
  store(y + tile_offsets(4, 8, 8), acc);
  Kernel k = kb.finish();
  HostBuffer hx = random_ints(f32, 128, "x", 29, -50, 50), hy = poisoned(f32, 32, "y");
  interpret(k, kOne, {InterpArg::ptr(hx), InterpArg::ptr(hy)});
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 8; ++j) {
      double want = 0;
      for (int b = 0; b < 4; ++b)
        want += hx.get(i * 32 + b * 8 + j);
      EXPECT_EQ(hy.get(i * 8 + j), want);
    }
}

TEST(Interpreter, ProgramIdsAndAtomicAdd) {
  // Every program adds its linear id to one counter and records the counter's old value.
  KernelBuilder kb("atomics");
  Value counter = kb.arg_ptr("counter", i32), olds = kb.arg_ptr("olds", i32);
  Value pid =
      program_id(0) + program_id(1) * num_programs(0) + program_id(2) * num_programs(0) * num_programs(1);
  Value old = atomic_add(counter, pid + 1);
  store(olds + pid, old);
  Kernel k = kb.finish();
  HostBuffer hc(i32, 1, "counter"), ho = poisoned(i32, 24, "olds");
  interpret(k, Grid{2, 3, 4}, {InterpArg::ptr(hc), InterpArg::ptr(ho)});
  EXPECT_EQ(hc.get_int(0), 24 * 25 / 2);
  for (int p = 0; p < 24; ++p) // programs run in order, x fastest
    EXPECT_EQ(ho.get_int(p), p * (p + 1) / 2) << p;
}

// atomic_add through a block pointer: programs of the same parity add to the same block, blocks that cross the
// tensor's edges (below row 0, past R, past C) add only what lies inside, and nothing outside the tensor changes.
TEST(Interpreter, BlockAtomicAddSumsWhatLiesInsideTheTensor) {
  const int64_t P = 5, BR = 4, BC = 8, R = 6, C = 10, stride_r = 12;
  for (auto [row_off, col_off, shift] : {std::tuple{0, 0, 2}, {-2, 5, 3}, {3, -3, -4}}) {
    SCOPED_TRACE(fmt::format("row_off {} col_off {} shift {}", row_off, col_off, shift));
    Kernel k = kiln_test::block_atomic_add_kernel(BR, BC, f32, 4);
    HostBuffer x = random_floats(f32, P * BR * BC, "x", 7);
    HostBuffer y = random_floats(f32, R * stride_r, "y", 8);
    const std::vector<double> want =
        kiln_test::block_atomic_add_reference(x, y, P, BR, BC, R, C, stride_r, 1, row_off, col_off, shift);
    interpret(k, Grid{P, 1, 1},
              {InterpArg::ptr(x), InterpArg::ptr(y), InterpArg::of_int(R), InterpArg::of_int(C),
               InterpArg::of_int(stride_r), InterpArg::of_int(1), InterpArg::of_int(row_off),
               InterpArg::of_int(col_off), InterpArg::of_int(shift)});
    for (int64_t i = 0; i < y.numel(); ++i) // f32 sums of a few terms in program order: within rounding
      EXPECT_NEAR(y.get(i), want[static_cast<size_t>(i)], 1e-5 * (1 + std::abs(want[static_cast<size_t>(i)]))) << i;
  }
}

// An integer block adds exactly, and atomic_add(bp, value) without a boundary check adds the whole block.
TEST(Interpreter, BlockAtomicAddOfIntegersWithoutABoundaryCheck) {
  KernelBuilder kb("block_atomic_add_i32");
  Value y = kb.arg_ptr("y", i32);
  Value v = atomic_add(make_block_ptr(y, {4, 4}, {4, 1}, {1, 0}, {2, 4}, {1, 0}), zeros({2, 4}, i32) + (program_id(0) + 1));
  EXPECT_FALSE(v.valid()); // nothing comes back through a block pointer
  Kernel k = kb.finish();
  HostBuffer hy(i32, 16, "y");
  interpret(k, Grid{3, 1, 1}, {InterpArg::ptr(hy)});
  for (int i = 0; i < 16; ++i)
    EXPECT_EQ(hy.get_int(i), i >= 4 && i < 12 ? 1 + 2 + 3 : 0) << i;
}

// ---- errors ----

TEST(Interpreter, UnmaskedOutOfBoundsLoadIsAnError) {
  Kernel k = unary_kernel(f32, f32, 16, [](Value v) { return v; });
  HostBuffer x = random_floats(f32, 10, "short_x", 32), y = poisoned(f32, 16, "y");
  std::string msg = error_of([&] { interpret(k, kOne, {InterpArg::ptr(x), InterpArg::ptr(y)}); });
  EXPECT_NE(msg.find("out of bounds"), std::string::npos) << msg;
  EXPECT_NE(msg.find("interpreter_test_support.h:"), std::string::npos) << msg; // unary_kernel's load
  EXPECT_NE(msg.find("'short_x'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("element 10"), std::string::npos) << msg;
  EXPECT_NE(msg.find("10 elements"), std::string::npos) << msg;
  for (int i = 0; i < 16; ++i)
    EXPECT_TRUE(std::isnan(y.get(i))) << "nothing may be stored after a failed load";
}

TEST(Interpreter, UncheckedBlockOutsideTheBufferIsAnError) {
  KernelBuilder kb("block_oob");
  Value x = kb.arg_ptr("x", f32), y = kb.arg_ptr("y", f32);
  Value bp = make_block_ptr(x, {5, 6}, {6, 1}, {0, 0}, {8, 8}, {1, 0});
  store(y + tile_offsets(8, 8, 8), load(bp, {1})); // dim 0 unchecked: rows 5..7 fall past the buffer
  Kernel k = kb.finish();
  HostBuffer hx = random_floats(f32, 30, "x", 33), hy = poisoned(f32, 64, "y");
  std::string msg = error_of([&] { interpret(k, kOne, {InterpArg::ptr(hx), InterpArg::ptr(hy)}); });
  EXPECT_NE(msg.find("out of bounds"), std::string::npos) << msg;
  EXPECT_NE(msg.find("load_block"), std::string::npos) << msg;
  EXPECT_NE(msg.find("interpreter_memory_test.cpp:"), std::string::npos) << msg;
  EXPECT_NE(msg.find("dim 0 is outside the tensor and unchecked"), std::string::npos) << msg;
}

TEST(Interpreter, OutOfBoundsStoreWritesNothing) {
  Kernel k = unary_kernel(f32, f32, 16, [](Value v) { return v; });
  HostBuffer x = random_floats(f32, 16, "x", 34), y = poisoned(f32, 12, "short_y");
  std::string msg = error_of([&] { interpret(k, kOne, {InterpArg::ptr(x), InterpArg::ptr(y)}); });
  EXPECT_NE(msg.find("store"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'short_y'"), std::string::npos) << msg;
  for (int i = 0; i < 12; ++i)
    EXPECT_TRUE(std::isnan(y.get(i)));
}

} // namespace
