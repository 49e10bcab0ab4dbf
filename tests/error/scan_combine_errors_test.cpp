// Error tests for cumprod, prod, associative_scan and sort: a combine holding a load, program_id or a
// reduction (not elementwise), one using a value of the kernel, one returning another dtype or an empty Value,
// one that reassigns a variable of the kernel, an empty std::function, ReduceOp::Combine passed to scan(), and
// the shape rules (axis out of range, a scalar, booleans) under the new names. A combine of another arity does
// not convert to CombineFn, so it fails to compile rather than here.
#include "dsl/dsl.h"
#include "error/error_test_support.h"

#include <string>

using namespace kiln;
using kiln_test::expect_call_site;
using kiln_test::expect_mentions;
using kiln_test::user_error;

namespace {

TEST(AssociativeScanError, ALoadInsideTheCombine) {
  KernelBuilder kb("bad");
  Value p = kb.arg_ptr("p", f32);
  Value x = zeros({16}, f32);
  unsigned line = 0;
  std::string msg = user_error([&] {
    line = __LINE__; associative_scan(x, 0, [&](Value a, Value) { return a + load(p); });
  });
  expect_mentions(msg, {"associative_scan:", "only elementwise ops", "got load", "compute it outside the scan"});
  expect_call_site(msg, line);
}

TEST(AssociativeScanError, ProgramIdOrAReductionInsideTheCombine) {
  KernelBuilder kb("bad");
  Value x = arange(0, 16);
  unsigned line = 0;
  std::string msg = user_error([&] {
    line = __LINE__; associative_scan(x, 0, [&](Value a, Value b) { return a + b * program_id(0); });
  });
  expect_mentions(msg, {"associative_scan:", "only elementwise ops", "got program_id"});
  expect_call_site(msg, line);
  msg = user_error([&] { associative_scan(x, 0, [&](Value a, Value) { return a + sum(x, 0); }); });
  expect_mentions(msg, {"associative_scan:", "got reduce"});
}

TEST(AssociativeScanError, AValueOfTheKernelInsideTheCombine) {
  KernelBuilder kb("bad");
  Value n = kb.arg("n", i32);
  Value x = arange(0, 16);
  unsigned line = 0;
  std::string msg = user_error([&] {
    line = __LINE__; associative_scan(x, 0, [&](Value a, Value b) { return a + b + n; });
  });
  expect_mentions(msg, {"associative_scan:", "uses 'n' (i32), a value from outside it",
                        "sees only its two arguments and literals"});
  expect_call_site(msg, line);
}

TEST(AssociativeScanError, ACombineOfAnotherDtype) {
  KernelBuilder kb("bad");
  Value x = arange(0, 16);
  unsigned line = 0;
  std::string msg = user_error([&] {
    line = __LINE__; associative_scan(x, 0, [](Value a, Value b) { return (a + b).to(f32); });
  });
  expect_mentions(msg, {"associative_scan:", "must return one scalar of the scanned dtype i32, got f32",
                        ".to(i32)"});
  expect_call_site(msg, line);
  msg = user_error([&] { associative_scan(x, 0, [](Value a, Value b) { return a < b; }); });
  expect_mentions(msg, {"scanned dtype i32, got i1"});
}

TEST(AssociativeScanError, ACombineThatReturnsNoValue) {
  KernelBuilder kb("bad");
  Value x = arange(0, 16);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; associative_scan(x, 0, [](Value, Value) { return Value(); }); });
  expect_mentions(msg, {"associative_scan:", "holds no value", "return a + b;"});
  expect_call_site(msg, line);
  msg = user_error([&] { associative_scan(x, 0, CombineFn{}); });
  expect_mentions(msg, {"associative_scan:", "empty std::function"});
}

TEST(AssociativeScanError, ACombineThatAssignsAVariableOfTheKernel) {
  KernelBuilder kb("bad");
  Value x = arange(0, 16);
  Value last = scalar(0, i32);
  last.named("last");
  unsigned line = 0;
  std::string msg = user_error([&] {
    line = __LINE__; associative_scan(x, 0, [&](Value a, Value b) { last = a + b; return last; });
  });
  expect_mentions(msg, {"associative_scan:", "assigns variable 'last'", "only returns its result"});
  expect_call_site(msg, line);
}

TEST(AssociativeScanError, ShapeRules) {
  KernelBuilder kb("bad");
  auto add = [](Value a, Value b) { return a + b; };
  Value x = zeros({4, 8}, f32);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; associative_scan(x, 2, add); });
  expect_mentions(msg, {"associative_scan:", "axis 2 is out of range", "tensor<4x8xf32>"});
  expect_call_site(msg, line);
  msg = user_error([&] { associative_scan(scalar(1, f32), 0, add); });
  expect_mentions(msg, {"associative_scan:", "cannot scan a scalar"});
  msg = user_error([&] { associative_scan(arange(0, 8) < 3, 0, add); });
  expect_mentions(msg, {"associative_scan:", "cannot scan booleans"});
}

TEST(ScanError, ReduceOpCombineNeedsAFunction) {
  KernelBuilder kb("bad");
  Value x = arange(0, 16);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; scan(x, 0, ReduceOp::Combine); });
  expect_mentions(msg, {"scan:", "ReduceOp::Combine", "associative_scan(x, axis"});
  expect_call_site(msg, line);
}

TEST(CumprodError, ShapeRules) {
  KernelBuilder kb("bad");
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; cumprod(zeros({4, 8}, f32), -3); });
  expect_mentions(msg, {"cumprod:", "axis -1 is out of range"});
  expect_call_site(msg, line);
  msg = user_error([&] { cumprod(arange(0, 8) < 3, 0); });
  expect_mentions(msg, {"cumprod:", "cannot scan booleans", ".to(i32)"});
}

TEST(ProdError, ShapeRules) {
  KernelBuilder kb("bad");
  Value s = kb.arg("s", f32);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; prod(s, 0); });
  expect_mentions(msg, {"prod:", "cannot reduce a scalar"});
  expect_call_site(msg, line);
  msg = user_error([&] { prod(arange(0, 8) < 3, 0); });
  expect_mentions(msg, {"prod:", "cannot reduce booleans"});
}

TEST(SortError, ShapeRules) {
  KernelBuilder kb("bad");
  Value s = kb.arg("s", f32);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; sort(s, 0); });
  expect_mentions(msg, {"sort:", "cannot sort a scalar", "rank 1 or more"});
  expect_call_site(msg, line);
  msg = user_error([&] { line = __LINE__; sort(zeros({4, 8}, f32), 2, true); });
  expect_mentions(msg, {"sort:", "axis 2 is out of range", "tensor<4x8xf32>", "valid axes are 0 to 1"});
  expect_call_site(msg, line);
  msg = user_error([&] { sort(arange(0, 8) < 3, 0); });
  expect_mentions(msg, {"sort:", "cannot sort booleans", ".to(i32)"});
}

} // namespace
