// The builder: values, broadcasting, loop-carried variables, if results.
#include "dsl/dsl.h"
#include "dsl/printer.h"

#include <gtest/gtest.h>

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

} // namespace
