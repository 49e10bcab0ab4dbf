// PointerRoots (codegen/pointer_roots.h): the pointer parameters a pointer may come from, through offsets,
// block pointers stepped in a loop and selections. The writes' roots decide which tensors a kernel never writes.
#include "codegen/pointer_roots.h"
#include "dsl/dsl.h"

#include <gtest/gtest.h>

using namespace kiln;

namespace {

// The operand 0 (the pointer) of every op of `kind` in the kernel, in program order.
std::vector<ValueId> pointers_of(const Kernel& k, OpKind kind) {
  std::vector<ValueId> out;
  walk(k.body, [&](const Op& op) {
    if (op.kind == kind)
      out.push_back(op.operands[0]);
  });
  return out;
}

TEST(PointerRoots, FollowsLoopsSelectionsAndBlockPointerSteps) {
  KernelBuilder kb("roots");
  Value a = kb.arg_ptr("a", f32), b = kb.arg_ptr("b", f32), c = kb.arg_ptr("c", f32), d = kb.arg_ptr("d", f32);
  Value n = kb.arg("N", i32);
  // a: read through a block pointer stepped in a loop; c: written through one carried by the loop.
  Value pa = make_block_ptr(a, {n}, {1}, {0}, {16}, {0});
  Value pc = make_block_ptr(c, {n}, {1}, {0}, {16}, {0});
  for_range(0, n, 16, [&](Value) {
    store(pc, load(pa));
    pa = advance(pa, {16});
    pc = advance(pc, {16});
  });
  // b or d, chosen at run time, is read: both are its roots.
  Value chosen = where(n > 4, b, d);
  store(c + arange(0, 16), load(chosen + arange(0, 16)));
  const Kernel k = kb.finish();
  PointerRoots roots(k);
  const std::vector<ValueId> loads = pointers_of(k, OpKind::LoadBlock), gathers = pointers_of(k, OpKind::Load);
  ASSERT_EQ(loads.size(), 1u);
  ASSERT_EQ(gathers.size(), 1u);
  EXPECT_EQ(roots.of(loads[0]), (std::set<int>{0}));
  EXPECT_EQ(roots.of(gathers[0]), (std::set<int>{1, 3}));
  EXPECT_EQ(roots.written(), (std::set<int>{2}));
  EXPECT_TRUE(roots.never_written(loads[0]));
  EXPECT_TRUE(roots.never_written(gathers[0]));
  for (ValueId v : pointers_of(k, OpKind::StoreBlock))
    EXPECT_FALSE(roots.never_written(v));
}

} // namespace
