// A block pointer's base as a tensor map sees it (codegen/block_base.h): a pointer parameter plus per-program
// terms `coordinate * stride` with strides known at launch, and the bound on each coordinate that the IR
// proves.
#include "codegen/block_base.h"
#include "dsl/dsl.h"
#include "dsl/registry.h"
#include "head_group_kernel.h"

#include <gtest/gtest.h>

#include <functional>
#include <optional>
#include <string>
#include <vector>

using namespace kiln;

namespace {

// The ValueId of the base of the kernel's first make_block_ptr whose base is computed in the kernel, not a
// parameter as it is (the load's).
ValueId block_base_of(const Kernel& k) {
  ValueId base = -1;
  walk(k.body, [&](const Op& op) {
    if (op.kind == OpKind::MakeBlockPtr && base < 0 && k.info(op.operands[0]).param_index < 0)
      base = op.operands[0];
  });
  return base;
}

// A kernel reading one 64 x 64 block of `x` at the base `base_of(x, H, stride_b, stride_h)`.
template <class BaseOf> Kernel kernel_with_base(BaseOf base_of) {
  KernelBuilder kb("block_base", Config{});
  Value x = kb.arg_ptr("X", f16);
  Value y = kb.arg_ptr("Y", f16);
  Value H = kb.arg("H", i32);
  Value N = kb.arg("N", i32);
  Value stride_b = kb.arg("stride_b", i64);
  Value stride_h = kb.arg("stride_h", i64);
  Value stride_n = kb.arg("stride_n", i64);
  Value base = base_of(x, H, stride_b, stride_h);
  Value bp = make_block_ptr(base, {N, 64}, {stride_n, 1}, {0, 0}, {64, 64}, {1, 0});
  Value t = load(bp);
  store(make_block_ptr(y, {N, 64}, {stride_n, 1}, {0, 0}, {64, 64}, {1, 0}), t);
  return kb.finish();
}

TEST(BlockBase, ABaseOfBatchAndHeadTermsIsTheParameterAndTwoBoundedDims) {
  Kernel k = kernel_with_base([](Value x, Value H, Value sb, Value sh) {
    Value off_hz = program_id(1);
    Value off_b = (off_hz / H).to(i64), off_h = (off_hz % H).to(i64);
    return x + (off_b * sb + off_h * sh);
  });
  std::string why;
  std::optional<BlockBase> b = decompose_block_base(k, block_base_of(k), why);
  ASSERT_TRUE(b) << why;
  EXPECT_EQ(b->param, 0);
  ASSERT_EQ(b->terms.size(), 2u);
  EXPECT_EQ(b->terms[0].stride.params, std::vector<int>{4}); // stride_b
  EXPECT_EQ(b->terms[1].stride.params, std::vector<int>{5}); // stride_h
  for (const OuterDim& t : b->terms)
    EXPECT_EQ(t.extent, kMaxGridYZ); // program_id(1) <= 65534; division and remainder keep it
}

TEST(BlockBase, StridesOnEitherSideAndNestedPointerAdditions) {
  Kernel k = kernel_with_base([](Value x, Value, Value sb, Value sh) {
    Value off_b = program_id(0).to(i64), off_h = program_id(2).to(i64);
    return (x + sb * off_b) + off_h * sh;
  });
  std::string why;
  std::optional<BlockBase> b = decompose_block_base(k, block_base_of(k), why);
  ASSERT_TRUE(b) << why;
  ASSERT_EQ(b->terms.size(), 2u);
  EXPECT_EQ(b->terms[0].stride.params, std::vector<int>{4});
  EXPECT_EQ(b->terms[0].extent, kMaxGridX); // program_id(0) <= 2^31 - 2
  EXPECT_EQ(b->terms[1].stride.params, std::vector<int>{5});
}

TEST(BlockBase, ACoordinateWithoutABoundIsRefusedWithTheReason) {
  // H is a parameter: any value, so pid * H / 3 may not fit a 32-bit coordinate (nor may pid * H, but that one is pid
  // at a stride H times longer: see the test below).
  Kernel k = kernel_with_base(
      [](Value x, Value H, Value sb, Value) { return x + ((program_id(1) * H) / 3).to(i64) * sb; });
  std::string why;
  EXPECT_FALSE(decompose_block_base(k, block_base_of(k), why));
  EXPECT_NE(why.find("may exceed the 32 bits a TMA coordinate holds"), std::string::npos) << why;
}

TEST(BlockBase, ATermWithoutALaunchStrideIsRefused) {
  Kernel k = kernel_with_base([](Value x, Value, Value, Value) {
    Value off = program_id(0).to(i64);
    return x + off * (off + 1);
  });
  std::string why;
  EXPECT_FALSE(decompose_block_base(k, block_base_of(k), why));
  EXPECT_NE(why.find("multiplies two values computed in the kernel"), std::string::npos) << why;
}

// The extent of the one term of `x + coordinate * stride_b`, or nullopt when it is refused.
template <class CoordinateOf> std::optional<int64_t> extent_of(CoordinateOf coordinate_of) {
  Kernel k = kernel_with_base([&](Value x, Value H, Value sb, Value) { return x + coordinate_of(H) * sb; });
  std::string why;
  std::optional<BlockBase> b = decompose_block_base(k, block_base_of(k), why);
  if (!b)
    return std::nullopt;
  EXPECT_EQ(b->terms.size(), 1u);
  return b->terms.at(0).extent;
}

TEST(BlockBase, MagnitudeBoundsFollowTheArithmetic) {
  EXPECT_EQ(extent_of([](Value) { return (program_id(1) * 2 + 7).to(i64); }), 65534 * 2 + 7 + 1);
  EXPECT_EQ(extent_of([](Value H) { return (program_id(2) / H).to(i64) + 3; }), 65534 + 3 + 1);
  EXPECT_EQ(extent_of([](Value H) { return maximum(program_id(2) % H, program_id(1)).to(i64); }), 65534 + 1);
  // min(pid, H) is not bounded by a constant (H may be negative: then so is the min, which nonneg_conditions
  // leaves to the launch), but by H, so the map's dim is H + 1 long at launch (extent 0 here).
  EXPECT_EQ(extent_of([](Value H) { return minimum(program_id(2), H).to(i64); }), 0);
  // Past 2^31 - 1 (under a maximum, whose parts are not terms of their own: see the test below).
  EXPECT_FALSE(extent_of([](Value) { return maximum(program_id(0) + 3, 0).to(i64); }));
  EXPECT_FALSE(extent_of([](Value) { return maximum(program_id(0) * 2, 0).to(i64); }));
  // The minimum of two values >= 0 is at most either: an unbounded one (program_id(0) * 4 may pass 2^31) capped
  // by a bounded one, as FA2's grouped causal order caps its head (kernels/attention/attention_mods.h).
  EXPECT_EQ(extent_of([](Value) { return minimum(program_id(0) * 4, num_programs(1)).to(i64); }), 65535 + 1);
  EXPECT_EQ(extent_of([](Value) { return minimum(program_id(1) * 4, program_id(2)).to(i64); }), 65534 + 1);
  // Not where a side may be negative (min(-2^40, 5) = -2^40), nor where it is >= 0 only while H is.
  EXPECT_FALSE(extent_of([](Value) { return minimum(program_id(0) * -4, num_programs(1)).to(i64); }));
  EXPECT_FALSE(extent_of([](Value H) { return minimum(program_id(0) * H, num_programs(1)).to(i64); }));
}

// A coordinate without a bound of its own that is a sum, or a product with a factor the launch knows, is taken apart:
// LSE's base in the backward, `LSE + (b * H + h) * N`, is b at stride H * N and h at stride N (both products of
// parameters), each bounded by the grid.
TEST(BlockBase, AnUnboundedSumOfProductsIsTakenApartIntoTermsWhoseStridesAreProducts) {
  Kernel k = kernel_with_base([](Value x, Value H, Value sb, Value) {
    Value off_hz = program_id(1);
    Value off_b = off_hz / H, off_h = off_hz % H;
    return x + (off_b * H + off_h).to(i64) * sb; // sb as N
  });
  std::string why;
  std::optional<BlockBase> b = decompose_block_base(k, block_base_of(k), why);
  ASSERT_TRUE(b) << why;
  ASSERT_EQ(b->terms.size(), 2u);
  EXPECT_EQ(b->terms[0].stride.params, (std::vector<int>{4, 2})) << "stride_b times H";
  EXPECT_EQ(b->terms[0].stride.constant, 1);
  EXPECT_EQ(b->terms[1].stride.params, std::vector<int>{4});
  EXPECT_EQ(b->terms[1].stride.constant, 1);
  for (const OuterDim& t : b->terms)
    EXPECT_EQ(t.extent, kMaxGridYZ);
  // A constant factor goes to the scale: (pid(0) * 4) * H as pid(0) at stride 4 H, when pid(0) * 4 may pass 2^31.
  Kernel scaled =
      kernel_with_base([](Value x, Value H, Value, Value) { return x + (program_id(0) * 4).to(i64) * H.to(i64); });
  b = decompose_block_base(scaled, block_base_of(scaled), why);
  ASSERT_TRUE(b) << why;
  ASSERT_EQ(b->terms.size(), 1u);
  EXPECT_EQ(b->terms[0].stride.params, std::vector<int>{2});
  EXPECT_EQ(b->terms[0].stride.constant, 4);
  EXPECT_EQ(b->terms[0].extent, kMaxGridX);
}

// The one term of `x + coordinate * stride_b` (H is parameter 2), or nullopt with `why` when it is refused.
template <class CoordinateOf> std::optional<OuterDim> term_of(CoordinateOf coordinate_of, std::string& why) {
  Kernel k = kernel_with_base([&](Value x, Value H, Value sb, Value) { return x + coordinate_of(H) * sb; });
  std::optional<BlockBase> b = decompose_block_base(k, block_base_of(k), why);
  if (!b)
    return std::nullopt;
  EXPECT_EQ(b->terms.size(), 1u);
  return b->terms.at(0);
}

TEST(BlockBase, ACoordinateThatMayBeNegativeIsRefusedWithTheReason) {
  // Program 0 reads the block before the base: legal pointer arithmetic, which cp.async reads and a tensor
  // map would fill with zeros.
  for (auto coordinate : std::vector<std::function<Value(Value)>>{
           [](Value) { return (program_id(1) - 1).to(i64); },
           [](Value) { return -program_id(1).to(i64); },
           [](Value) { return (program_id(2) - program_id(1)).to(i64); },
       }) {
    std::string why;
    EXPECT_FALSE(term_of(coordinate, why));
    EXPECT_NE(why.find("may be negative"), std::string::npos) << why;
  }
}

TEST(BlockBase, ACoordinateIsNonNegativeWhileTheParametersItIsBuiltFromAre) {
  std::string why;
  // FA2's batch offset, off_hz / H: >= 0 while H is, which the launch checks.
  std::optional<OuterDim> t = term_of([](Value H) { return (program_id(1) / H).to(i64); }, why);
  ASSERT_TRUE(t) << why;
  EXPECT_EQ(t->nonneg_params, std::vector<int>{2});
  // Its head offset, off_hz % H: a remainder has the sign of the dividend, whatever H is.
  t = term_of([](Value H) { return (program_id(1) % H).to(i64); }, why);
  ASSERT_TRUE(t) << why;
  EXPECT_TRUE(t->nonneg_params.empty());
  // A maximum with 0 needs nothing; a minimum and a sum need both sides; H twice is one condition.
  t = term_of([](Value) { return maximum(program_id(1) - 1, 0).to(i64); }, why);
  ASSERT_TRUE(t) << why;
  EXPECT_TRUE(t->nonneg_params.empty());
  t = term_of(
      [](Value H) { return (minimum(program_id(1) / H, program_id(2) % H) + program_id(2) / H).to(i64); },
      why);
  ASSERT_TRUE(t) << why;
  EXPECT_EQ(t->nonneg_params, std::vector<int>{2});
}

TEST(BlockBase, ACoordinateCappedByAParameterIsADimThatParameterPlusOneLong) {
  // dK/dV's pattern (tests/head_group_kernel.h): x's base `x + min(head0 + g, H) * stride_h` inside a loop over g.
  Kernel k = kiln_test::head_group_kernel(/*capped=*/true);
  std::string why;
  std::optional<BlockBase> b = decompose_block_base(k, block_base_of(k), why);
  ASSERT_TRUE(b) << why;
  ASSERT_EQ(b->terms.size(), 1u);
  EXPECT_EQ(b->terms[0].extent_param, 3); // H
  EXPECT_EQ(b->terms[0].extent, 0);
  // >= 0 while H (the cap) and group (head0 = pid * group) are: the loop's variable starts at 0 and grows.
  EXPECT_EQ(b->terms[0].nonneg_params, (std::vector<int>{3, 4}));
}

TEST(BlockBase, AnUncappedLoopCoordinateOrOneThatStartsBelowZeroKeepsCpAsync) {
  std::string why;
  Kernel uncapped = kiln_test::head_group_kernel(/*capped=*/false);
  EXPECT_FALSE(decompose_block_base(uncapped, block_base_of(uncapped), why));
  EXPECT_NE(why.find("may exceed the 32 bits a TMA coordinate holds"), std::string::npos) << why;
  EXPECT_NE(why.find("writing min(x, P) caps it"), std::string::npos) << why; // and says how to reach TMA
  // The loop starts at pid - 1: its variable may be -1, and min(-1, H) is -1.
  Kernel below = kiln_test::head_group_kernel(/*capped=*/true, /*starts_below_zero=*/true);
  EXPECT_FALSE(decompose_block_base(below, block_base_of(below), why));
  EXPECT_NE(why.find("may be negative"), std::string::npos) << why;
}

} // namespace
