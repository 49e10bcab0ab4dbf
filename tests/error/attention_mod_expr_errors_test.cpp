// Error tests of mods written as expressions (attention_mod_expr.h): malformed text (with the column),
// unknown names and functions, arities, a mask mod reading the score, tensor reads indexed by anything but b,
// h, q_idx, kv_idx or read two ways, a number where a condition goes and the other way round, and
// integer-only operators on floats. Each is a kiln::Error naming the expression and what was expected.
#include "error/error_test_support.h"
#include "kernels/attention/attention_mod_expr.h"
#include "kernels/attention/attention_mod_spec.h"
#include "kernels/attention/fa2_fwd.h"

#include <gtest/gtest.h>

using namespace kiln;
using kiln_test::expect_mentions;
using kiln_test::user_error;

namespace {

// The error of building the forward kernel with `specs` (the mods' functions run when the kernel is built).
std::string error_of(const std::string& specs) {
  return user_error([&] {
    AttentionMods mods = parse_mod_specs(specs).mods;
    (void)fa2_fwd_def(mods).build(Config{});
  });
}

TEST(AttentionModExpressionErrors, MalformedTextNamesTheColumnAndWhatWasExpected) {
  expect_mentions(error_of("score=score *"), {"score mod expression 'score *'",
                                              "expected a number, a name or '('", "column 8", "got the end"});
  expect_mentions(error_of("score=(score + 1"), {"expected ')'", "column 11"});
  expect_mentions(error_of("score=score 2"), {"expected an operator or the end", "column 7", "got '2'"});
  expect_mentions(error_of("mask=x:i64[b] > 0"), {"a tensor's dtype (f32, f16, bf16 or i32)"});
  expect_mentions(error_of("score=99999999999 * score"), {"an integer of 32 bits"});
  expect_mentions(error_of("score="), {"score mod expression ''", "column 1", "got the end"});
  // Sizes that would take the tree's walks deep into the stack.
  expect_mentions(error_of("score=" + std::string(200, '(') + "score" + std::string(200, ')')),
                  {"nested more than 128 deep"});
  std::string chain = "score";
  for (int i = 0; i < 1100; ++i)
    chain += "+1";
  expect_mentions(error_of("score=" + chain), {"more than 1024 operations"});
}

TEST(AttentionModExpressionErrors, UnknownNamesAndFunctionsListWhatExists) {
  expect_mentions(error_of("score=score * scale"),
                  {"unknown name 'scale'", "score, b, h, q_idx, kv_idx, N_Q, N_K, H, H_KV"});
  expect_mentions(error_of("score=softplus(score)"), {"unknown function 'softplus'", "tanh, sigmoid"});
  expect_mentions(error_of("score=min(score)"), {"min() takes 2 argument(s); got 1"});
  expect_mentions(error_of("mask=score > 0"), {"'score' is a score mod's input"});
}

TEST(AttentionModExpressionErrors, TensorsAreIndexedByTheModsIndicesOneWay) {
  expect_mentions(error_of("score=score + t[q_idx + 1]"),
                  {"tensor 't' is indexed by '(q_idx+1)'", "one of b, h, q_idx, kv_idx per dim"});
  expect_mentions(error_of("score=score + t[h] + t[b]"),
                  {"tensor 't' is read as f32 [H] and as f32 [B]",
                   "dims that differ only where one read runs along the queries (q_idx) and the other along the "
                   "keys (kv_idx)"});
  // Along the queries and the keys both is allowed (one tensor, two specs), but not in another dim too.
  expect_mentions(error_of("mask=d:i32[b, q_idx] == d:i32[h, kv_idx]"),
                  {"tensor 'd' is read as i32 [B, N_Q] and as i32 [H, N_K]"});
  // The name kiln gives the second read's spec is not a user tensor's.
  expect_mentions(error_of("mask=d:i32[q_idx] == d:i32[kv_idx] && d__N_K:i32[kv_idx] > 0"),
                  {"tensor 'd__N_K' is also the name kiln gives tensor 'd' read along [N_K]"});
  expect_mentions(error_of("mask=d__N_K:i32[kv_idx] > 0 && d:i32[q_idx] == d:i32[kv_idx]"),
                  {"tensor 'd__N_K' is also the name kiln gives tensor 'd' read along [N_K]"});
  expect_mentions(error_of("score=score + t[h] + t:f16[h]"), {"tensor 't' is read as"});
  expect_mentions(error_of("score=score + t[]"), {"tensor 't' read with 0 indices; expected 1 to 4"});
  expect_mentions(error_of("score=score + t[b, h, h, q_idx, kv_idx]"), {"read with 5 indices"});
}

TEST(AttentionModExpressionErrors, ConditionsAndNumbersGoWhereTheyBelong) {
  expect_mentions(error_of("mask=kv_idx - q_idx"), {"it is a number; expected a condition"});
  expect_mentions(error_of("score=score > 0"), {"a score mod's result takes a number; got a condition"});
  expect_mentions(error_of("mask=kv_idx && q_idx"), {"'&&' takes a condition; got a number"});
  expect_mentions(error_of("mask=!(kv_idx)"), {"! takes a condition"});
  expect_mentions(error_of("score=where(score, 1, 2)"), {"where()'s condition takes a condition"});
  expect_mentions(error_of("score=score % 2"), {"'%' takes integers; got a float operand"});
  expect_mentions(error_of("mask=kv_idx % 0 == 1"), {"'%' by zero"});
  expect_mentions(error_of("mask=kv_idx < 65536 * 65536"), {"the integer 65536 * 65536 overflows"});
}

} // namespace
