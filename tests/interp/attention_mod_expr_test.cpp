// Score and mask mods written as expressions (attention_mod_expr.h), in the interpreter: each against the
// double-precision reference with the same mods (built from the same parse), and against the library mod it
// restates, run on the same inputs; the backward through an expression score mod, whose derivative the
// builder derives; the name that spells the expression, and what two spellings of one expression share.
#include "interp/attention_mods_bwd_cases.h"
#include "interp/attention_mods_cases.h"

#include "kernels/attention/attention_mod_expr.h"
#include "kernels/attention/attention_mod_spec.h"
#include "kernels/attention/fa2_fwd.h"

using namespace kiln;
using namespace kiln::testing_support;

namespace {

// The mods a spec list names (parse_mod_specs), for `base`, reading `tensors`.
ModCase spec_case(const std::string& name, const AttentionCase& base, const std::string& specs,
                  ModTensorValues tensors = {}) {
  ModCase c{name, base, parse_mod_specs(specs).mods, std::move(tensors)};
  return c;
}

// The expression case against its reference, and its output against the library case's on the same inputs.
void check_against_library(const ModCase& expr, const ModCase& library) {
  SCOPED_TRACE(expr.name);
  check_mod_case(expr, mod_case_config(expr));
  const AttentionProblem& p = expr.base.problem;
  const AttentionResult a = run_fa2_with_mods(p, expr.mods, expr.tensors, mod_case_config(expr),
                                              mod_case_inputs(expr), Executor::Interpreter);
  const AttentionResult b = run_fa2_with_mods(p, library.mods, library.tensors, mod_case_config(library),
                                              mod_case_inputs(library), Executor::Interpreter);
  const double tol = attention_tolerance(p.dtype, p.tf32, max_abs_lse(b));
  EXPECT_TRUE(compare_to_reference(a.o, b.o).ok(tol)) << compare_to_reference(a.o, b.o).str();
  EXPECT_TRUE(compare_to_reference(a.lse, b.lse).ok(tol)) << compare_to_reference(a.lse, b.lse).str();
}

TEST(AttentionModExpressions, SoftcapWrittenOutMatchesTheLibrarysSoftcap) {
  AttentionCase base = make_case(64, 100, 64, 0, DType::f16, 1, 1, false, true, 3.0);
  check_against_library(spec_case("softcap_expr", base, "score=5 * tanh(score / 5)"),
                        mod_case("softcap", base, {softcap(5)}, {}));
}

TEST(AttentionModExpressions, AlibiOverANamedTensorMatchesTheLibrarysAlibi) {
  AttentionCase base = make_case(100, 130, 64, 0, DType::f16, 4, 2);
  ModTensorData slopes = alibi_slopes(base.problem);
  ModTensorData renamed = slopes;
  renamed.data.name = "slopes";
  check_against_library(
      spec_case("alibi_expr", base, "score=score + slopes[h] * (kv_idx - q_idx)", {{"slopes", renamed}}),
      mod_case("alibi", base, {alibi()}, {}, {{"alibi_slopes", slopes}}));
}

TEST(AttentionModExpressions, ACausalWindowMatchesTheLibrarysSlidingWindow) {
  AttentionCase base = make_case(77, 130, 32, 0, DType::f16, 4, 2);
  check_against_library(spec_case("window_expr", base, "mask=kv_idx <= q_idx + 5 && !(kv_idx < q_idx - 7)"),
                        mod_case("window", base, {}, {sliding_window(7, 5)}));
}

TEST(AttentionModExpressions, DocumentsOverI32TensorsMatchTheLibrarysDocumentMask) {
  AttentionCase base = make_case(100, 100, 64, 0, DType::f16, 2, 1);
  base.problem.B = 2;
  ModTensorData ids = document_ids(base.problem, 100, {30, 1, 45, 9}, "q_doc");
  ModTensorData kv = ids;
  kv.data.name = "kv_doc";
  const ModTensorValues docs = {{"q_doc", ids}, {"kv_doc", kv}};
  check_against_library(
      spec_case("document_expr", base, "mask=q_doc:i32[b, q_idx] == kv_doc:i32[b, kv_idx]", docs),
      mod_case("document", base, {}, {document_mask()}, docs));
}

// One tensor read along the queries and along the keys, as FlexAttention's document masks read theirs: two specs
// (doc, and doc__B_N_K given as doc), one tensor given.
TEST(AttentionModExpressions, OneTensorReadAlongQueriesAndKeysMatchesTheLibrarysDocumentMask) {
  AttentionCase base = make_case(100, 100, 64, 0, DType::f16, 2, 1);
  base.problem.B = 2;
  ModTensorData ids = document_ids(base.problem, 100, {30, 1, 45, 9}, "q_doc");
  ModTensorData kv = ids;
  kv.data.name = "kv_doc";
  ModTensorData doc = ids;
  doc.data.name = "doc";
  const ModCase expr = spec_case("one_doc_tensor", base, "mask=doc:i32[b, q_idx] == doc:i32[b, kv_idx]",
                                 {{"doc", doc}});
  ASSERT_EQ(expr.mods.tensors().size(), 2u);
  EXPECT_EQ(expr.mods.tensors()[1].name, "doc__B_N_K");
  EXPECT_EQ(expr.mods.tensors()[1].tensor_name(), "doc");
  check_against_library(expr, mod_case("document", base, {}, {document_mask()}, {{"q_doc", ids}, {"kv_doc", kv}}));
}

// A score mod and a mask mod that read one tensor share it (one kernel argument): the bias is added where it
// is not below -1.5, and masks the rest, against the reference with the same mods.
TEST(AttentionModExpressions, AScoreAndAMaskModReadOneTensor) {
  AttentionCase base = make_case(40, 70, 32, 0, DType::f32, 2, 1);
  base.problem.B = 2;
  const AttentionProblem& p = base.problem;
  const ModCase c = spec_case("bias_scored_and_masked", base,
                              "score=score + bias[b, h, q_idx, kv_idx]; mask=bias[b, h, q_idx, kv_idx] >= -1.5",
                              {{"bias", bias_tensor(DType::f32, {p.B, p.H, p.N_Q, p.N_K}, 5)}});
  ASSERT_EQ(c.mods.tensors().size(), 1u);
  SCOPED_TRACE(c.name);
  check_mod_case(c, mod_case_config(c));
}

TEST(AttentionModExpressions, FunctionsIntegersAndLiteralsFollowTheirTypes) {
  // A float literal meets integers (promoted, not truncated), '%' and min/max stay integer, where() picks.
  AttentionCase base = make_case(50, 70, 32, 0, DType::f32, 2, 1);
  const ModCase c =
      spec_case("mixed", base,
                "score=where(kv_idx % 3 == 0, score * 0.5, score) + 0.25 * min(kv_idx, 40) / N_K - "
                "sigmoid(score) + pow(abs(score) + 1, 0.5);"
                "mask=max(q_idx - kv_idx, 0) < 30 || h == 1");
  check_mod_case(c, mod_case_config(c));
}

TEST(AttentionModExpressions, TheBackwardDifferentiatesAnExpressionScoreMod) {
  AttentionCase base = make_case(40, 60, 32, 0, DType::f32, 2, 1, false, true, 2.0);
  const ModCase c = spec_case("softcap_window_expr_bwd", base,
                              "score=4 * tanh(score / 4) + 0.1 * (kv_idx - q_idx);mask=kv_idx <= q_idx + 3");
  (void)check_mod_bwd_case(c, mod_case_bwd_configs(c));
}

TEST(AttentionModExpressions, TheNameSpellsTheExpressionWhateverItsBlanks) {
  const ScoreMod a = score_mod_from_expression("30*tanh(score/30)");
  const ScoreMod b = score_mod_from_expression("  30 * tanh( score / 30 ) ");
  EXPECT_EQ(a.name, "score(30*tanh((score/30)))");
  EXPECT_EQ(a.name, b.name);
  AttentionMods ma, mb, mc;
  ma.score = {a};
  mb.score = {b};
  mc.score = {score_mod_from_expression("30*tanh(score/31)")};
  EXPECT_EQ(fa2_fwd_def(ma).name, fa2_fwd_def(mb).name);
  EXPECT_NE(fa2_fwd_def(ma).name, fa2_fwd_def(mc).name);
  const MaskMod m = mask_mod_from_expression("q_doc:i32[b,q_idx]==kv_doc:i32[b,kv_idx] && !(h>0)");
  EXPECT_EQ(m.name, "mask((q_doc:i32[b,q_idx]==kv_doc:i32[b,kv_idx]) and not (h>0))");
  ASSERT_EQ(m.tensors.size(), 2u);
  EXPECT_EQ(m.tensors[0].dims, (std::vector<std::string>{"B", "N_Q"}));
  EXPECT_EQ(m.tensors[1].dtype, DType::i32);
}

} // namespace
