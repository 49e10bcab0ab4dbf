// Numpy broadcasting and Triton's dtype rules in the builder: rank promotion, size-1 stretching,
// scalar splat, literals that adopt the dtype of the value they meet, and rejected shapes.
#include "dsl/dsl.h"
#include "dsl/printer.h"

#include <gtest/gtest.h>

using namespace kiln;

namespace {

int count_ops(KernelBuilder& kb, OpKind kind) {
  int n = 0;
  walk(kb.kernel().body, [&](const Op& op) { n += op.kind == kind; });
  return n;
}

TEST(Broadcast, RankPromotionAlignsAtTheRight) {
  KernelBuilder kb("b");
  Value row = arange(0, 16).to(f32);  // (16,)
  Value tile = zeros({8, 16}, f32);   // (8, 16)
  Value sum = row + tile;
  EXPECT_EQ(sum.type(), Type::tensor(f32, {8, 16}));
  Value sum2 = tile + row;
  EXPECT_EQ(sum2.type(), Type::tensor(f32, {8, 16}));
  std::string ir = print_kernel(kb.kernel());
  EXPECT_NE(ir.find("reshape %"), std::string::npos) << "(16,) is first reshaped to (1, 16)\n" << ir;
  EXPECT_NE(ir.find(": tensor<1x16xf32>"), std::string::npos) << ir;
}

TEST(Broadcast, SizeOneDimsStretch) {
  KernelBuilder kb("b");
  Value col = arange(0, 32).expand_dims(1); // (32, 1)
  Value row = arange(0, 16).expand_dims(0); // (1, 16)
  Value grid = col * 16 + row;              // (32, 16)
  EXPECT_EQ(grid.type(), Type::tensor(i32, {32, 16}));
  EXPECT_EQ(count_ops(kb, OpKind::Broadcast), 3) << "the literal 16 splats, col and row stretch";
}

TEST(Broadcast, ThreeDimsStretchTogether) {
  KernelBuilder kb("b");
  Value a = zeros({2, 1, 8}, f32), b = zeros({4, 1}, f32);
  EXPECT_EQ((a - b).shape(), (Shape{2, 4, 8}));
}

TEST(Broadcast, ScalarSplatsToAnyShape) {
  KernelBuilder kb("b");
  Value s = kb.arg("s", f32);
  Value tile = zeros({4, 8}, f32);
  Value scaled = tile * s;
  EXPECT_EQ(scaled.type(), Type::tensor(f32, {4, 8}));
  EXPECT_EQ(count_ops(kb, OpKind::Reshape), 0) << "a scalar splats directly, without a reshape";
  EXPECT_EQ(s.broadcast_to({2, 2, 2}).shape(), (Shape{2, 2, 2}));
}

TEST(Broadcast, SameShapesAddNoOps) {
  KernelBuilder kb("b");
  Value a = zeros({16}, f32), b = zeros({16}, f32);
  Value c = a + b;
  EXPECT_EQ(count_ops(kb, OpKind::Broadcast), 0);
  EXPECT_EQ(count_ops(kb, OpKind::Cast), 0);
  EXPECT_EQ(c.type(), Type::tensor(f32, {16}));
}

TEST(Broadcast, LiteralsAdoptTheDtypeTheyMeet) {
  KernelBuilder kb("b");
  Value h = zeros({16}, f16), bh = zeros({16}, bf16), i = arange(0, 16), l = i.to(i64), u = i.to(u8);
  EXPECT_EQ((h * 0.5).dtype(), f16) << "f16_tile * 0.5 stays f16";
  EXPECT_EQ((h + 1).dtype(), f16) << "an integer literal meeting a float becomes that float";
  EXPECT_EQ((bh - 2.0f).dtype(), bf16);
  EXPECT_EQ((i * 0.5).dtype(), f32) << "i32_tile * 0.5 gives f32";
  EXPECT_EQ((i + 1).dtype(), i32) << "i32_tile + 1 stays i32";
  EXPECT_EQ((l + 1).dtype(), i64);
  EXPECT_EQ((u + 1).dtype(), u8);
  EXPECT_EQ((2 * i).dtype(), i32) << "a literal on the left too";
  EXPECT_EQ((1.5 - h).dtype(), f16);
  EXPECT_EQ((i < 3).type(), Type::tensor(i1, {16})) << "comparisons give booleans of the operand shape";
  EXPECT_EQ((h == 0).type(), Type::tensor(i1, {16}));
}

TEST(Broadcast, LiteralConstantsHoldExactValues) {
  KernelBuilder kb("b");
  Value h = zeros({16}, f16);
  Value i = arange(0, 16);
  Value x = h * 0.5;
  Value y = i + 7;
  (void)x;
  (void)y;
  std::vector<const Op*> consts;
  walk(kb.kernel().body, [&](const Op& op) {
    if (op.kind == OpKind::Constant && kb.kernel().type(op.result()).is_scalar())
      consts.push_back(&op);
  });
  ASSERT_EQ(consts.size(), 2u);
  EXPECT_EQ(kb.kernel().type(consts[0]->result()), Type::scalar(f16));
  EXPECT_EQ(consts[0]->f, 0.5);
  EXPECT_EQ(kb.kernel().type(consts[1]->result()), Type::scalar(i32));
  ASSERT_EQ(consts[1]->ints.size(), 1u);
  EXPECT_EQ(consts[1]->ints[0], 7);
}

TEST(Broadcast, ValuesOfDifferentDtypesPromote) {
  KernelBuilder kb("b");
  Value h = zeros({16}, f16), bh = zeros({16}, bf16), i = arange(0, 16);
  EXPECT_EQ((h + bh).dtype(), f32) << "f16 + bf16 -> f32: both are converted";
  EXPECT_EQ(count_ops(kb, OpKind::Cast), 2);
  EXPECT_EQ((i + h).dtype(), f16);
  EXPECT_EQ((i + i.to(i64)).dtype(), i64);
}

TEST(Broadcast, IncompatibleShapesAreRejected) {
  KernelBuilder kb("b");
  Value a = zeros({16}, f32), b = zeros({32}, f32), c = zeros({4, 16}, f32), d = zeros({8, 16}, f32);
  EXPECT_THROW(a + b, Error);
  EXPECT_THROW(c * d, Error);
  EXPECT_THROW(c.broadcast_to({16}), Error) << "broadcasting never drops dims";
  EXPECT_THROW(d.broadcast_to({8, 32}), Error) << "only size-1 dims stretch";
  EXPECT_NO_THROW(c + a);
}

TEST(Broadcast, PointerArithmeticBroadcasts) {
  KernelBuilder kb("b");
  Value p = kb.arg_ptr("p", f16);
  Value rows = arange(0, 32).expand_dims(1), cols = arange(0, 16).expand_dims(0);
  EXPECT_EQ((p + arange(0, 16)).type(), Type::pointer(f16, {16}));
  EXPECT_EQ((arange(0, 16) + p).type(), Type::pointer(f16, {16})) << "offsets + pointer also works";
  Value tile = p + rows * 16 + cols;
  EXPECT_EQ(tile.type(), Type::pointer(f16, {32, 16}));
  EXPECT_EQ((tile - 1).type(), Type::pointer(f16, {32, 16}));
}

TEST(Broadcast, WhereBroadcastsAllThree) {
  KernelBuilder kb("b");
  Value cond = arange(0, 16).expand_dims(1) < 8; // (16, 1)
  Value b = zeros({1, 8}, f32);
  Value w = where(cond, 1.0f, b);
  EXPECT_EQ(w.type(), Type::tensor(f32, {16, 8}));
}

TEST(Broadcast, MaskedLoadLiteralOtherTakesThePointee) {
  KernelBuilder kb("b");
  Value p = kb.arg_ptr("p", bf16), n = kb.arg("n", i32);
  Value offs = arange(0, 64);
  Value v = load(p + offs, offs < n, 0.0f); // the f32 literal becomes bf16
  EXPECT_EQ(v.type(), Type::tensor(bf16, {64}));
  Value scalar_mask = load(p + offs, n > 0, 0); // a scalar mask splats over the pointers
  EXPECT_EQ(scalar_mask.type(), Type::tensor(bf16, {64}));
}

TEST(Broadcast, StoreValueOfLowerRankThanThePointers) {
  // broadcast_to received ptr.shape(), a reference into the kernel's value table, and reshaped
  // (adding values) while reading it. Vary the table's size so that some call reallocates it.
  for (int pad = 0; pad < 40; ++pad) {
    KernelBuilder kb("store_row");
    Value p = kb.arg_ptr("p", f32);
    for (int i = 0; i < pad; ++i)
      scalar(i, f32);
    Value ptrs = p + arange(0, 16).expand_dims(1) * 16 + arange(0, 16).expand_dims(0); // (16, 16)
    store(ptrs, arange(0, 16).to(f32));                                              // (16,) -> (16, 16)
    Kernel k = kb.finish();
    const Op* st = k.body.ops.back().get();
    ASSERT_EQ(st->kind, OpKind::Store);
    EXPECT_EQ(k.type(st->operands[1]), Type::tensor(f32, {16, 16})) << "pad " << pad;
  }
}

} // namespace
