// Error tests for the builder itself: kernel arguments, empty and stale Values, calls outside a
// kernel, static_check, and config parameters.
#include "dsl/dsl.h"
#include "error/error_test_support.h"

#include <optional>

using namespace kiln;
using kiln_test::expect_call_site;
using kiln_test::expect_mentions;
using kiln_test::user_error;

namespace {

TEST(BuilderError, UnassignedValueInArithmetic) {
  KernelBuilder kb("bad");
  Value never;
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; Value y = never + 1; });
  expect_mentions(msg, {"add:", "holds no value", "never assigned"});
  expect_call_site(msg, line);
}

TEST(BuilderError, UnassignedValueInFunction) {
  KernelBuilder kb("bad");
  Value never;
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; exp(never); });
  expect_mentions(msg, {"holds no value", "never assigned"});
  expect_call_site(msg, line);
}

TEST(BuilderError, UnassignedValueAsReductionInput) {
  KernelBuilder kb("bad");
  Value never;
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; sum(never, -1); });
  expect_mentions(msg, {"sum:", "holds no value"});
  expect_call_site(msg, line);
}

TEST(BuilderError, UnassignedValueAsHint) {
  KernelBuilder kb("bad");
  Value never;
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; multiple_of(never, 16); });
  expect_mentions(msg, {"multiple_of:", "holds no value"});
  expect_call_site(msg, line);
}

TEST(BuilderError, DslCallOutsideAnyBuilder) {
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; arange(0, 16); });
  expect_mentions(msg, {"outside a kernel", "KernelBuilder"});
  expect_call_site(msg, line);
}

TEST(BuilderError, ValueUsedAfterItsBuilderIsGone) {
  std::optional<Value> stale;
  {
    KernelBuilder kb("gone");
    stale = arange(0, 16);
  }
  EXPECT_FALSE(stale->valid()) << "a Value outliving its builder is empty";
  KernelBuilder kb("next");
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; Value y = *stale * 2; });
  expect_mentions(msg, {"mul:", "holds no value"});
  expect_call_site(msg, line);
}

TEST(BuilderError, ValueUsedAfterFinish) {
  KernelBuilder kb("done");
  Value p = kb.arg_ptr("p", f32);
  Value offs = arange(0, 16);
  store(p + offs, offs.to(f32));
  kb.finish();
  EXPECT_FALSE(offs.valid()) << "finish() empties the handles";
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; Value y = offs + 1; });
  expect_mentions(msg, {"add:", "holds no value", "finished"});
  expect_call_site(msg, line);
}

TEST(BuilderError, DslCallAfterFinish) {
  KernelBuilder kb("done");
  kb.finish();
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; arange(0, 16); });
  expect_mentions(msg, {"arange:", "kernel 'done' is already finished"});
  expect_call_site(msg, line);
}

TEST(BuilderError, TwoArgumentsWithOneName) {
  KernelBuilder kb("bad");
  kb.arg_ptr("x", f32);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; kb.arg("x", i32); });
  expect_mentions(msg, {"kernel 'bad'", "already has an argument named 'x'", "unique"});
  expect_call_site(msg, line);
}

TEST(BuilderError, ScalarArgumentOfUnsupportedDtype) {
  KernelBuilder kb("bad");
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; kb.arg("scale", f16); });
  expect_mentions(msg, {"'scale'", "i32, i64 or f32", "got f16", "f32"});
  expect_call_site(msg, line);
}

TEST(BuilderError, StaticCheckFails) {
  KernelBuilder kb("bad", Config().set("BLOCK_K", 8));
  unsigned line = 0;
  std::string msg = user_error(
      [&] { line = __LINE__; static_check(kb.config().get("BLOCK_K") >= 16, "BLOCK_K must be at least 16 for mma"); });
  expect_mentions(msg, {"static_check failed", "BLOCK_K must be at least 16 for mma"});
  expect_call_site(msg, line);
}

TEST(BuilderError, ConfigGetOfMissingParameter) {
  Config c;
  c.set("BLOCK_M", 64).set("BLOCK_N", 32);
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; c.get("BLOCK_K"); });
  expect_mentions(msg, {"no parameter 'BLOCK_K'", "BLOCK_M, BLOCK_N"});
  expect_call_site(msg, line);
}

TEST(BuilderError, ValueFromAnotherLiveBuilder) {
  KernelBuilder outer("outer");
  Value from_outer = arange(0, 16);
  KernelBuilder inner("inner");
  unsigned line = 0;
  std::string msg = user_error([&] { line = __LINE__; exp(from_outer.to(f32)); });
  expect_mentions(msg, {"another kernel's builder"});
  expect_call_site(msg, line);
}

} // namespace
