// The builder: values, broadcasting, loop-carried variables, if results.
#include "dsl/dsl.h"
#include "dsl/printer.h"

#include <gtest/gtest.h>

#include <optional>

using namespace kiln;

namespace {

Kernel vector_add(int64_t block) {
  KernelBuilder kb("add", Config().set("BLOCK", block));
  Value x = kb.arg_ptr("x", f32), y = kb.arg_ptr("y", f32), out = kb.arg_ptr("out", f32), n = kb.arg("n", i32);
  Value offs = program_id(0) * block + arange(0, block); // (BLOCK,) i32
  Value mask = offs < n;
  store(out + offs, load(x + offs, mask, 0.0f) + load(y + offs, mask, 0.0f), mask);
  return kb.finish();
}

TEST(Builder, VectorAddTypes) {
  Kernel k = vector_add(256);
  std::string ir = print_kernel(k);
  EXPECT_NE(ir.find("kernel @add(%x0: ptr<f32>"), std::string::npos) << ir;
  EXPECT_NE(ir.find("arange 0, 256 : tensor<256xi32>"), std::string::npos) << ir;
  EXPECT_NE(ir.find("store masked"), std::string::npos) << ir;
  EXPECT_NE(ir.find("builder_test.cpp:"), std::string::npos) << "call sites are printed\n" << ir;
}

TEST(Builder, LoopCarriedOnlyReassignedVariables) {
  KernelBuilder kb("loop");
  Value p = kb.arg_ptr("p", f32), n = kb.arg("n", i32);
  Value acc = zeros({16}, f32).named("acc");
  Value unchanged = zeros({16}, f32).named("keep");
  for_range(0, n, 1, [&](Value i) { acc = acc + unchanged * i.to(f32); });
  store(p + arange(0, 16), acc);
  Kernel k = kb.finish();
  const Op* loop = nullptr;
  walk(k.body, [&](const Op& op) {
    if (op.kind == OpKind::For)
      loop = &op;
  });
  ASSERT_NE(loop, nullptr);
  EXPECT_EQ(loop->results.size(), 1u) << print_kernel(k);
  EXPECT_EQ(loop->regions[0].args.size(), 2u);
}

TEST(Builder, IfResults) {
  KernelBuilder kb("branch");
  Value p = kb.arg_ptr("p", f32), n = kb.arg("n", i32);
  Value v = zeros({16}, f32);
  if_(n > 4, [&] { v = v + 1.0f; }, [&] { v = v - 1.0f; });
  store(p + arange(0, 16), v);
  Kernel k = kb.finish();
  std::string ir = print_kernel(k);
  EXPECT_NE(ir.find(" = if "), std::string::npos) << ir;
}

TEST(Builder, BroadcastRowsAndColumns) {
  KernelBuilder kb("bcast");
  Value p = kb.arg_ptr("p", f32);
  Value rows = arange(0, 32).expand_dims(1); // (32, 1)
  Value cols = arange(0, 16).expand_dims(0); // (1, 16)
  Value offs = rows * 16 + cols;             // (32, 16)
  EXPECT_EQ(offs.shape(), (Shape{32, 16}));
  store(p + offs, offs.to(f32));
  kb.finish();
}

// ---- loop-carried detection and if results in detail ----

std::vector<const Op*> ops_of(const Region& r, OpKind kind) {
  std::vector<const Op*> out;
  walk(r, [&](const Op& op) {
    if (op.kind == kind)
      out.push_back(&op);
  });
  return out;
}

TEST(Builder, NestedLoopsCarryWhatEachLevelChanges) {
  KernelBuilder kb("nested");
  Value p = kb.arg_ptr("p", f32), n = kb.arg("n", i32);
  Value acc = zeros({16}, f32).named("acc");     // changed in the inner loop: carried by both
  Value outer_only = zeros({16}, f32).named("o"); // changed in the outer body only
  Value untouched = zeros({16}, f32).named("u");
  for_range(0, n, 1, [&](Value i) {
    for_range(0, i, 1, [&](Value j) { acc = acc + j.to(f32); });
    outer_only = outer_only + untouched;
  });
  store(p + arange(0, 16), acc + outer_only);
  Kernel k = kb.finish();
  auto loops = ops_of(k.body, OpKind::For);
  ASSERT_EQ(loops.size(), 2u);
  const Op* outer = loops[0];
  const Op* inner = loops[1];
  EXPECT_EQ(outer->results.size(), 2u) << print_kernel(k);
  EXPECT_EQ(inner->results.size(), 1u) << print_kernel(k);
  EXPECT_EQ(k.info(inner->results[0]).name, "acc");
  // The inner loop's init is the outer loop's region argument for acc, not the value before both.
  EXPECT_EQ(inner->operands[3], outer->regions[0].args[1]) << print_kernel(k);
  // After the loops, the C++ variables hold the outer loop's results.
  std::string ir = print_kernel(k);
  EXPECT_NE(ir.find("%acc"), std::string::npos);
}

TEST(Builder, VariablesHoldLoopResultsAfterTheLoop) {
  KernelBuilder kb("after");
  Value n = kb.arg("n", i32);
  Value acc = zeros({16}, f32);
  Value same = acc;     // a second handle to the initial value, never reassigned
  ValueId before = acc.id();
  for_range(0, n, 1, [&](Value) { acc = acc * 2.0f; });
  auto loops = ops_of(kb.kernel().body, OpKind::For);
  ASSERT_EQ(loops.size(), 1u);
  ASSERT_EQ(loops[0]->results.size(), 1u) << "only the reassigned handle is carried";
  EXPECT_EQ(acc.id(), loops[0]->results[0]);
  EXPECT_EQ(same.id(), before) << "the untouched handle still holds the value from before the loop";
}

TEST(Builder, CarriedBlockPointerAdvancedInTheLoop) {
  KernelBuilder kb("bp_loop");
  Value a = kb.arg_ptr("a", f16), out = kb.arg_ptr("out", f32), K = kb.arg("K", i32);
  Value a_bp = make_block_ptr(a, {64, K}, {K, 1}, {0, 0}, {64, 32}, {1, 0}); // (64, 32) f16
  Value acc = zeros({64, 64}, f32);
  for_range(0, K, 32, [&](Value) {
    Value t = load(a_bp, {0, 1}); // (64, 32) f16
    acc = dot(t, trans(t), acc);
    a_bp = advance(a_bp, {0, 32});
  });
  store(make_block_ptr(out, {64, 64}, {64, 1}, {0, 0}, {64, 64}, {1, 0}), acc);
  Kernel k = kb.finish();
  const Op* loop = ops_of(k.body, OpKind::For).at(0);
  ASSERT_EQ(loop->results.size(), 2u) << print_kernel(k);
  std::vector<Type> carried;
  for (ValueId r : loop->results)
    carried.push_back(k.type(r));
  EXPECT_NE(std::find(carried.begin(), carried.end(), Type::block_ptr(f16, {64, 32}, {1, 0})), carried.end());
  EXPECT_NE(std::find(carried.begin(), carried.end(), Type::tensor(f32, {64, 64})), carried.end());
  // The load inside the loop reads the region argument (this iteration's pointer), not the initial one.
  const Op* load_op = ops_of(loop->regions[0], OpKind::LoadBlock).at(0);
  const auto& args = loop->regions[0].args;
  EXPECT_NE(std::find(args.begin(), args.end(), load_op->operands[0]), args.end());
}

TEST(Builder, ReassignedInAnIfInsideAFor) {
  KernelBuilder kb("if_in_for");
  Value p = kb.arg_ptr("p", f32), n = kb.arg("n", i32);
  Value m = full({16}, -1.0, f32).named("m");
  for_range(0, n, 1, [&](Value i) { if_(i > 3, [&] { m = maximum(m, i.to(f32)); }); });
  store(p + arange(0, 16), m);
  Kernel k = kb.finish();
  const Op* loop = ops_of(k.body, OpKind::For).at(0);
  const Op* branch = ops_of(k.body, OpKind::If).at(0);
  EXPECT_EQ(branch->results.size(), 1u);
  EXPECT_EQ(loop->results.size(), 1u);
  // The loop yields the if's result.
  const Op* yield = loop->regions[0].ops.back().get();
  ASSERT_EQ(yield->kind, OpKind::Yield);
  EXPECT_EQ(yield->operands[0], branch->results[0]) << print_kernel(k);
}

TEST(Builder, IfWithoutElseYieldsTheValueFromBefore) {
  KernelBuilder kb("if_no_else");
  Value p = kb.arg_ptr("p", f32), n = kb.arg("n", i32);
  Value v = zeros({16}, f32);
  Value keep = zeros({16}, f32);
  ValueId before = v.id();
  if_(n > 4, [&] { v = v + keep; });
  store(p + arange(0, 16), v + keep);
  Kernel k = kb.finish();
  const Op* branch = ops_of(k.body, OpKind::If).at(0);
  ASSERT_EQ(branch->regions.size(), 2u);
  ASSERT_EQ(branch->results.size(), 1u);
  const Region& else_region = branch->regions[1];
  ASSERT_EQ(else_region.ops.size(), 1u) << "the else branch is only a yield";
  EXPECT_EQ(else_region.ops[0]->kind, OpKind::Yield);
  EXPECT_EQ(else_region.ops[0]->operands[0], before);
}

TEST(Builder, IfThatChangesNothingHasNoResults) {
  KernelBuilder kb("if_effect");
  Value p = kb.arg_ptr("p", f32), n = kb.arg("n", i32);
  if_(n > 4, [&] { store(p + arange(0, 16), zeros({16}, f32)); });
  Kernel k = kb.finish();
  EXPECT_TRUE(ops_of(k.body, OpKind::If).at(0)->results.empty());
}

TEST(Builder, InductionVariableIsI64WhenABoundIs) {
  KernelBuilder kb("wide");
  Value n = kb.arg("n", i64);
  Value seen = scalar(0, i64);
  for_range(0, n, 1, [&](Value i) {
    EXPECT_EQ(i.type(), Type::scalar(i64));
    seen = seen + i;
  });
  EXPECT_EQ(seen.dtype(), i64);
}

TEST(Builder, ValuesOutlivingTheirBuilderBecomeEmpty) {
  std::optional<Value> kept;
  {
    KernelBuilder kb("short");
    kept = arange(0, 16);
    EXPECT_TRUE(kept->valid());
  }
  EXPECT_FALSE(kept->valid());
  unsigned line = 0;
  try {
    line = __LINE__; kept->shape();
    ADD_FAILURE() << "an empty handle must report an Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("builder_test.cpp:" + std::to_string(line)), std::string::npos) << e.what();
  }
  Value copy = *kept;
  EXPECT_FALSE(copy.valid());
}

TEST(Builder, FinishEmptiesHandles) {
  KernelBuilder kb("fin");
  Value p = kb.arg_ptr("p", f32);
  Value x = arange(0, 16).to(f32);
  store(p + arange(0, 16), x);
  Kernel k = kb.finish();
  EXPECT_FALSE(x.valid());
  EXPECT_THROW(x.shape(), Error);
  EXPECT_EQ(k.name, "fin");
  EXPECT_EQ(k.params.size(), 1u);
}

TEST(Builder, BoundaryCheckBracesPickTheBlockPointerOverload) {
  KernelBuilder kb("braces");
  Value p = kb.arg_ptr("p", f32);
  Value bp = make_block_ptr(p, {64, 64}, {64, 1}, {0, 0}, {16, 16}, {1, 0});
  Value t = load(bp, {0, 1});
  store(bp, t + 1.0f, {0, 1});
  store(bp, 0.0f + scalar(2.0, f32), {1}); // a scalar fills the block
  Kernel k = kb.finish();
  auto loads = ops_of(k.body, OpKind::LoadBlock);
  auto stores = ops_of(k.body, OpKind::StoreBlock);
  ASSERT_EQ(loads.size(), 1u);
  ASSERT_EQ(stores.size(), 2u);
  EXPECT_EQ(loads[0]->ints, (llvm::SmallVector<int64_t, 4>{0, 1}));
  EXPECT_EQ(stores[1]->ints, (llvm::SmallVector<int64_t, 4>{1}));
  EXPECT_EQ(k.type(stores[1]->operands[1]), Type::tensor(f32, {16, 16}));
}

TEST(Builder, LoopBodyTemporariesDoNotLeakIntoTheKernel) {
  KernelBuilder kb("temps");
  Value p = kb.arg_ptr("p", f32), n = kb.arg("n", i32);
  Value acc = zeros({16}, f32);
  for_range(0, n, 1, [&](Value i) {
    Value local = i.to(f32) * 2.0f; // dies with the body
    acc = acc + local;
  });
  store(p + arange(0, 16), acc);
  EXPECT_NO_THROW(kb.finish());
}

} // namespace
