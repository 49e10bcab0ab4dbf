// Error tests for for_range and if_: loop-carried variables, branch results, bounds and conditions.
#include "dsl/dsl.h"
#include "error/error_test_support.h"

#include <vector>

using namespace kiln;
using kiln_test::expect_call_site;
using kiln_test::expect_mentions;
using kiln_test::user_error;

namespace {

TEST(ControlFlowError, LoopCarriedDtypeChangesNamed) {
  KernelBuilder kb("bad");
  Value n = kb.arg("n", i32);
  Value acc = zeros({16}, f32).named("acc");
  unsigned line = 0;
  std::string msg =
      user_error([&] { line = __LINE__; for_range(0, n, 1, [&](Value) { acc = acc.to(f16); }); });
  expect_mentions(msg, {"for:", "'acc'", "tensor<16xf32>", "tensor<16xf16>", ".to()"});
  expect_call_site(msg, line);
}

TEST(ControlFlowError, LoopCarriedShapeChanges) {
  KernelBuilder kb("bad");
  Value n = kb.arg("n", i32);
  Value row = zeros({16}, f32);
  unsigned line = 0;
  std::string msg =
      user_error([&] { line = __LINE__; for_range(0, n, 1, [&](Value) { row = row.expand_dims(0); }); });
  expect_mentions(msg, {"for:", "changes type from tensor<16xf32> to tensor<1x16xf32>"});
  expect_call_site(msg, line);
}

TEST(ControlFlowError, IfBranchesAssignDifferentTypes) {
  KernelBuilder kb("bad");
  Value n = kb.arg("n", i32);
  Value v = zeros({16}, f32).named("v");
  unsigned line = 0;
  std::string msg = user_error([&] {
    line = __LINE__; if_(n > 0, [&] { v = v + 1.0f; }, [&] { v = v.to(bf16); });
  });
  expect_mentions(msg, {"if:", "'v'", "tensor<16xf32>", "tensor<16xbf16>", "both branches"});
  expect_call_site(msg, line);
}

TEST(ControlFlowError, IfConditionIsATile) {
  KernelBuilder kb("bad");
  Value n = kb.arg("n", i32);
  Value c = arange(0, 16) < n;
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; if_(c, [&] {}); });
  expect_mentions(msg, {"if_:", "scalar i1", "tensor<16xi1>", "where("});
  expect_call_site(msg, line);
}

TEST(ControlFlowError, IfConditionIsAnInteger) {
  KernelBuilder kb("bad");
  Value n = kb.arg("n", i32);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; if_(n, [&] {}); });
  expect_mentions(msg, {"if_:", "scalar i1", "got i32", "n > 0"});
  expect_call_site(msg, line);
}

TEST(ControlFlowError, ForRangeTensorBound) {
  KernelBuilder kb("bad");
  Value hi = arange(0, 16);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; for_range(0, hi, 1, [&](Value) {}); });
  expect_mentions(msg, {"for_range:", "upper bound", "integer scalar", "tensor<16xi32>"});
  expect_call_site(msg, line);
}

TEST(ControlFlowError, ForRangeFloatStep) {
  KernelBuilder kb("bad");
  Value step = kb.arg("step", f32);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; for_range(0, 64, step, [&](Value) {}); });
  expect_mentions(msg, {"for_range:", "step", "integer scalar", "got f32", ".to(i32)"});
  expect_call_site(msg, line);
}

TEST(ControlFlowError, VariableFirstAssignedInsideLoop) {
  KernelBuilder kb("bad");
  Value n = kb.arg("n", i32);
  Value acc;
  unsigned line = 0;
  std::string msg = user_error(
      [&] { line = __LINE__; for_range(0, n, 1, [&](Value) { acc = zeros({16}, f32).named("acc"); }); });
  expect_mentions(msg, {"for_range:", "variable 'acc'", "had no value before it", "zeros"});
  expect_call_site(msg, line);
}

TEST(ControlFlowError, VariableFirstAssignedInsideIf) {
  KernelBuilder kb("bad");
  Value n = kb.arg("n", i32);
  Value v;
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; if_(n > 0, [&] { v = arange(0, 16); }); });
  expect_mentions(msg, {"if_:", "had no value before it"});
  expect_call_site(msg, line);
}

TEST(ControlFlowError, LoopValueEscapesIntoContainer) {
  KernelBuilder kb("bad");
  Value n = kb.arg("n", i32);
  std::vector<Value> partials;
  unsigned line = 0;
  std::string msg = user_error(
      [&] { line = __LINE__; for_range(0, n, 1, [&](Value i) { partials.push_back(i.to(f32)); }); });
  expect_mentions(msg, {"for_range:", "created inside the for_range body outlives it"});
  expect_call_site(msg, line);
}

TEST(ControlFlowError, FinishInsideLoop) {
  KernelBuilder kb("bad");
  Value n = kb.arg("n", i32);
  unsigned line = 0;
  std::string msg = user_error([&] { for_range(0, n, 1, [&](Value) { line = __LINE__; kb.finish(); }); });
  expect_mentions(msg, {"finish()", "inside a for_range or if_ body"});
  expect_call_site(msg, line);
}

} // namespace
