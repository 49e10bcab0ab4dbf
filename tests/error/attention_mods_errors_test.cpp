// Error tests of attention mods (attention_mods.h): mods that break the rules (wrong return type or shape,
// unknown tensors, bad names, library mods with bad parameters), host tensors that do not fit their specs,
// the host API's checks of options.mods / options.mod_tensors (no GPU: addresses are never dereferenced), and
// the backward's: score mods it cannot differentiate, mod tensors overlapping a gradient.
#include "error/error_test_support.h"
#include "kernels/attention/attention_api.h"
#include "kernels/attention/attention_bwd_api.h"
#include "kernels/attention/attention_bwd_problem.h"
#include "kernels/attention/attention_mod_library.h"
#include "kernels/attention/attention_mod_spec.h"
#include "kernels/attention/attention_mods_host.h"
#include "kernels/attention/fa2_bwd_dkdv.h"
#include "kernels/attention/fa2_bwd_dq.h"
#include "kernels/attention/fa2_fwd.h"

#include "dsl/dsl.h"

#include <gtest/gtest.h>

using namespace kiln;
using kiln_test::expect_mentions;
using kiln_test::user_error;

namespace {

AttentionMods score_only(ScoreModFn fn) {
  AttentionMods m;
  m.score = {ScoreMod{"bad_score", {}, std::move(fn), {}}};
  return m;
}

AttentionMods mask_only(MaskModFn fn) {
  AttentionMods m;
  m.mask = {MaskMod{"bad_mask", {}, std::move(fn), {}, {}}};
  return m;
}

std::string build_error(const AttentionMods& mods) {
  return user_error([&] { (void)fa2_fwd_def(mods).build(default_fa2_config(AttentionProblem{})); });
}

TEST(AttentionModErrors, MaskModReturningAFloatTile) {
  const AttentionMods mods = mask_only([](const ModArgs& m) { return (m.kv_idx - m.q_idx).to(f32); });
  expect_mentions(build_error(mods), {"mask_mod 'bad_mask' returned", "f32", "expected an i1 (bool) tile"});
  expect_mentions(user_error([&] { (void)mods.identity(); }), {"mask_mod 'bad_mask'", "i1"});
}

TEST(AttentionModErrors, ScoreModReturningABoolOrAnEmptyValue) {
  expect_mentions(build_error(score_only([](const Value& s, const ModArgs&) { return s > 0.0; })),
                  {"score_mod 'bad_score' returned", "i1", "expected a float tile"});
  expect_mentions(build_error(score_only([](const Value&, const ModArgs&) { return Value(); })),
                  {"score_mod 'bad_score' returned an empty Value", "expected a float tile"});
}

TEST(AttentionModErrors, ScoreModReturningATileOfAnotherShape) {
  const std::string msg =
      build_error(score_only([](const Value&, const ModArgs&) { return zeros({8}, f32); }));
  expect_mentions(msg, {"score_mod 'bad_score' returned tensor<8xf32>", "broadcastable to the score tile ("});
}

TEST(AttentionModErrors, LoadOfATensorNoModDeclares) {
  const std::string msg =
      build_error(score_only([](const Value& s, const ModArgs& m) { return s + m.load("bias", {m.h}); }));
  expect_mentions(msg, {"mod tensor 'bias' is not declared", "declared: none"});
}

TEST(AttentionModErrors, LoadWithTheWrongNumberOfIndices) {
  AttentionMods mods;
  mods.score = {alibi()};
  mods.score[0].fn = [](const Value& s, const ModArgs& m) { return s + m.load("alibi_slopes", {m.b, m.h}); };
  expect_mentions(build_error(mods), {"mod tensor 'alibi_slopes' has 1 dims (H)", "got 2 indices"});
}

TEST(AttentionModErrors, BadTensorDeclarations) {
  // Two mods may read one tensor when they declare it alike (one kernel argument), not otherwise.
  AttentionMods shared;
  shared.score = {additive_bias(), additive_bias()};
  EXPECT_EQ(shared.tensors().size(), 1u);
  AttentionMods dup;
  dup.score = {additive_bias(DType::f32), additive_bias(DType::f16)};
  expect_mentions(user_error([&] { (void)dup.tensors(); }),
                  {"tensor 'bias' is declared as f32 [B, H, N_Q, N_K] by mod", "and as f16 [B, H, N_Q, N_K] by mod",
                   "expected one dtype and one set of dims for a name"});
  AttentionMods dims;
  dims.score = {
      ScoreMod{"x", {{"t", DType::f32, {"N"}}}, [](const Value& s, const ModArgs&) { return s; }, {}}};
  expect_mentions(user_error([&] { (void)dims.tensors(); }), {"dim 'N'", "B, H, H_KV, N_Q, N_K"});
  AttentionMods name;
  name.score = {
      ScoreMod{"x", {{"my-bias", DType::f32, {"H"}}}, [](const Value& s, const ModArgs&) { return s; }, {}}};
  expect_mentions(user_error([&] { (void)name.tensors(); }), {"'my-bias'", "identifier"});
  AttentionMods two_sinks;
  two_sinks.sink = {attention_sinks(), attention_sinks()};
  expect_mentions(user_error([&] { (void)two_sinks.tensors(); }), {"2 sinks", "at most one"});
  AttentionMods bad_sink;
  bad_sink.sink = {SinkMod{"row_sink", {}, [](const ModArgs& m) { return m.kv_idx.to(f32); }, {}}};
  expect_mentions(user_error([&] { (void)bad_sink.identity(); }), {"sink 'row_sink' returned", "(16, 1)"});
  AttentionMods unnamed;
  unnamed.mask = {MaskMod{"", {}, [](const ModArgs& m) { return m.kv_idx <= m.q_idx; }, {}, {}}};
  expect_mentions(user_error([&] { (void)unnamed.identity(); }), {"a mod has no name"});
}

TEST(AttentionModErrors, LibraryModsWithBadParameters) {
  expect_mentions(user_error([] { (void)softcap(0); }), {"softcap", "cap is 0", "above 0"});
  expect_mentions(user_error([] { (void)softcap(std::nan("")); }), {"softcap", "finite"});
  expect_mentions(user_error([] { (void)sliding_window(-1, 0); }), {"sliding_window", "left is -1"});
  expect_mentions(user_error([] { (void)prefix_lm(-3); }), {"prefix_lm", "prefix is -3"});
  expect_mentions(user_error([] { (void)additive_bias(DType::i32); }),
                  {"additive_bias", "i32", "f32, f16 or bf16"});
}

TEST(AttentionModErrors, ModsFromMalformedText) {
  AttentionMods m;
  expect_mentions(user_error([&] { add_mod_spec(m, "flash"); }),
                  {"unknown mod 'flash'", "sliding_window"});
  expect_mentions(user_error([&] { add_mod_spec(m, "softcap"); }), {"softcap=<CAP>"});
  expect_mentions(user_error([&] { add_mod_spec(m, "softcap=abc"); }), {"'abc' is not a number"});
  expect_mentions(user_error([&] { add_mod_spec(m, "sliding_window=4,x"); }),
                  {"'x' is not a number of keys"});
  expect_mentions(user_error([&] { add_mod_spec(m, "alibi=2"); }), {"'alibi' takes no argument"});
  expect_mentions(user_error([&] { add_mod_spec(m, "causal=diagonal"); }), {"top-left or bottom-right"});
  expect_mentions(user_error([&] { add_mod_spec(m, "bias=i8"); }), {"f32, f16 or bf16", "'i8'"});
  EXPECT_TRUE(m.empty()) << "nothing added by a failed parse";
}

TEST(AttentionModErrors, MalformedSpecLists) {
  expect_mentions(user_error([] { (void)parse_mod_specs("causal;flash"); }),
                  {"mod spec 'flash'", "unknown mod 'flash'", "causal[=top-left|bottom-right]", "sinks"});
  expect_mentions(user_error([] { (void)parse_mod_specs("sinks;sinks"); }), {"mod specs 'sinks;sinks'", "sinks"});
  expect_mentions(user_error([] { (void)parse_mod_specs("alibi; score=score + alibi_slopes:f16[h]"); }),
                  {"mod specs 'alibi; score=score + alibi_slopes:f16[h]'",
                   "'alibi_slopes' is declared as f32 [H] by mod 'alibi' and as f16 [H]"});
  expect_mentions(user_error([] { (void)parse_mod_specs("prefix_lm=-2"); }), {"prefix_lm", "prefix is -2"});
  expect_mentions(user_error([] { (void)parse_mod_specs("sliding_window=8,2,1"); }),
                  {"mod spec 'sliding_window=8,2,1'", "'2,1' is not a number of keys"});
}

TEST(AttentionModErrors, HostTensorsThatDoNotFitTheirSpecs) {
  AttentionProblem p;
  p.H = 4;
  p.H_KV = 2;
  p.N_Q = 10;
  p.N_K = 20;
  AttentionInputs in = make_inputs(p, 1, 1.0);
  AttentionMods mods;
  mods.score = {alibi()};
  Config config = default_fa2_config(p);
  auto run = [&](const ModTensorValues& t) {
    return user_error([&] { (void)reference_with_mods(p, in, mods, t); });
  };
  expect_mentions(run({}), {"read a tensor 'alibi_slopes', which was not given"});
  expect_mentions(run({{"alibi_slopes", contiguous_mod_tensor(DType::f16, {4}, "s")}}),
                  {"dtype f16", "expected f32"});
  expect_mentions(run({{"alibi_slopes", contiguous_mod_tensor(DType::f32, {3}, "s")}}),
                  {"extent 3 in dim 0 (H)", "expected 4 or 1"});
  expect_mentions(run({{"alibi_slopes", contiguous_mod_tensor(DType::f32, {4, 1}, "s")}}),
                  {"has 2 dims", "[H=4]"});
  ModTensorData short_buffer = contiguous_mod_tensor(DType::f32, {4}, "s");
  short_buffer.strides[0] = 2;
  expect_mentions(run({{"alibi_slopes", short_buffer}}), {"holds 4 elements", "reach element 6"});
  expect_mentions(run({{"alibi_slopes", contiguous_mod_tensor(DType::f32, {4}, "s")},
                       {"extra", contiguous_mod_tensor(DType::f32, {4}, "s")}}),
                  {"'extra' was given, but no mod"});
  AttentionMods no_ref;
  no_ref.mask = {MaskMod{"mine", {}, [](const ModArgs& m) { return m.kv_idx <= m.q_idx; }, {}, {}}};
  expect_mentions(user_error([&] { (void)reference_with_mods(p, in, no_ref, {}); }),
                  {"mask_mod 'mine' has no reference"});
}

// ---- the host API ----

struct Call {
  attention::TensorRef q, k, v, o;
  std::optional<attention::TensorRef> lse;
  attention::AttentionOptions options;
};

// B=2, H=4, H_KV=2, N_Q=64, N_K=80, D=64, f16, with ALiBi and a document mask and their tensors.
Call valid_mod_call() {
  using attention::TensorRef;
  Call c;
  c.q = TensorRef::contiguous(0x10000000, DType::f16, {2, 4, 64, 64});
  c.k = TensorRef::contiguous(0x20000000, DType::f16, {2, 2, 80, 64});
  c.v = TensorRef::contiguous(0x30000000, DType::f16, {2, 2, 80, 64});
  c.o = TensorRef::contiguous(0x40000000, DType::f16, {2, 4, 64, 64});
  c.lse = TensorRef::contiguous(0x50000000, DType::f32, {2, 4, 64});
  c.options.mods.score = {alibi()};
  c.options.mods.mask = {document_mask()};
  c.options.mod_tensors = {{"alibi_slopes", TensorRef::contiguous(0x60000000, DType::f32, {4})},
                           {"q_doc", TensorRef::contiguous(0x61000000, DType::i32, {2, 64})},
                           {"kv_doc", TensorRef::contiguous(0x62000000, DType::i32, {1, 80})}};
  return c;
}

std::string api_error(const Call& c) {
  return user_error([&] { (void)attention::validate_attention_args(c.q, c.k, c.v, c.o, c.lse, c.options); });
}

TEST(AttentionModApiErrors, AValidCallPassesWithTheKernelsStrides) {
  Call c = valid_mod_call();
  const attention::ValidatedAttention a =
      attention::validate_attention_args(c.q, c.k, c.v, c.o, c.lse, c.options);
  ASSERT_EQ(a.mod_tensors.size(), 3u);
  EXPECT_EQ(a.mod_tensors[0].name, "alibi_slopes");
  EXPECT_EQ(a.mod_tensors[1].strides, (std::vector<int64_t>{64, 1}));
  EXPECT_EQ(a.mod_tensors[2].strides, (std::vector<int64_t>{0, 1})) << "a broadcast batch dim reads stride 0";
}

TEST(AttentionModApiErrors, EachBrokenModTensorIsNamed) {
  using attention::TensorRef;
  Call c = valid_mod_call();
  c.options.mod_tensors.erase("q_doc");
  expect_mentions(api_error(c), {"attention::forward:", "read a tensor 'q_doc'", "i32 [B, N_Q]"});
  c = valid_mod_call();
  c.options.mod_tensors["q_doc"].dtype = DType::i64;
  expect_mentions(api_error(c), {"mod tensor 'q_doc' has dtype i64; expected i32"});
  c = valid_mod_call();
  c.options.mod_tensors["kv_doc"] = TensorRef::contiguous(0x62000000, DType::i32, {2, 64});
  expect_mentions(api_error(c), {"mod tensor 'kv_doc' has extent 64 in dim 1 (N_K)", "expected 80 or 1"});
  c = valid_mod_call();
  c.options.mod_tensors["alibi_slopes"].data = 0;
  expect_mentions(api_error(c), {"mod tensor 'alibi_slopes' has a null data address"});
  c = valid_mod_call();
  c.options.mod_tensors["alibi_slopes"].data = 0x60000002;
  expect_mentions(api_error(c), {"not a multiple of its element size, 4 bytes"});
  c = valid_mod_call();
  c.options.mod_tensors["alibi_slopes"].data = 0x50000000 + 16; // inside lse
  expect_mentions(api_error(c), {"mod tensor 'alibi_slopes'", "overlaps lse"});
  c = valid_mod_call();
  c.options.mod_tensors["stray"] = TensorRef::contiguous(0x63000000, DType::f32, {4});
  expect_mentions(api_error(c), {"options.mod_tensors holds 'stray', which no mod"});
  c = valid_mod_call();
  c.options.mods = {};
  expect_mentions(api_error(c), {"options.mods is empty"});
}

TEST(AttentionModApiErrors, ABrokenModFailsBeforeAnyGpuWork) {
  Call c = valid_mod_call();
  c.options.mods.mask[0].fn = [](const ModArgs& m) { return m.kv_idx.to(f32); };
  expect_mentions(api_error(c), {"attention::forward: options.mods:", "mask_mod 'document' returned"});
}

// dO, dQ, dK, dV for valid_mod_call(), apart from its tensors (dk at `dk_at`).
struct Grads {
  attention::TensorRef dout, dq, dk, dv;
};
Grads grads_for(const Call& c, uint64_t dk_at = 0x70000000) {
  using attention::TensorRef;
  return Grads{TensorRef::contiguous(0x90000000, DType::f16, c.q.shape),
               TensorRef::contiguous(0x80000000, DType::f16, c.q.shape),
               TensorRef::contiguous(dk_at, DType::f16, c.k.shape),
               TensorRef::contiguous(0xa0000000, DType::f16, c.v.shape)};
}

TEST(AttentionModApiErrors, TheBackwardTakesModsAndFa1RejectsThem) {
  Call c = valid_mod_call();
  attention::BackwardOptions b;
  static_cast<attention::AttentionOptions&>(b) = c.options;
  const Grads g = grads_for(c);
  const attention::ValidatedBackward v =
      attention::validate_attention_bwd_args(c.q, c.k, c.v, c.o, *c.lse, g.dout, g.dq, g.dk, g.dv, b);
  ASSERT_EQ(v.fwd.mod_tensors.size(), 3u);
  EXPECT_EQ(v.fwd.mod_tensors[1].strides, (std::vector<int64_t>{64, 1}));
  const std::string msg = user_error([&] { attention::fa1_forward(c.q, c.k, c.v, c.o, c.lse, c.options); });
  expect_mentions(msg, {"attention::fa1_forward:", "not supported by fa1_forward yet"});
}

// ---- the backward: mods it cannot differentiate, mod tensors under the gradients ----

std::string bwd_build_error(const AttentionMods& mods) {
  AttentionProblem p;
  return user_error([&] { (void)fa2_bwd_dq_def(mods).build(default_bwd_configs(p).dq); });
}

TEST(AttentionModBwdErrors, AReductionInAScoreModNamesTheModAndTheOp) {
  int line = 0;
  const AttentionMods mods = score_only([&](const Value& s, const ModArgs&) {
    line = __LINE__ + 1; // the reduction, on the next line
    return s - max(s, 1, true);
  });
  const std::string msg = bwd_build_error(mods);
  expect_mentions(msg, {"score_mod 'bad_score': cannot differentiate op 'reduce max'", "not elementwise",
                        "give the mod's derivative explicitly",
                        fmt::format("attention_mods_errors_test.cpp:{}", line)});
  // The forward does not need the derivative: the same mod builds there.
  (void)fa2_fwd_def(mods).build(default_fa2_config(AttentionProblem{}));
  // With its own derivative the backward builds.
  AttentionMods given = mods;
  given.score[0].derivative = [](const Value& s, const ModArgs&) { return full(s.shape(), 1.0, f32); };
  (void)fa2_bwd_dkdv_def(given).build(default_bwd_configs(AttentionProblem{}).dkdv);
}

TEST(AttentionModBwdErrors, ControlFlowAndRandomNumbersInAScoreMod) {
  expect_mentions(bwd_build_error(score_only([](const Value& s, const ModArgs& m) {
                    Value r = s;
                    if_(m.h > 0, [&] { r = r * 2.0; });
                    return r;
                  })),
                  {"score_mod 'bad_score': cannot differentiate op 'if'", "use where() instead of if_"});
  expect_mentions(bwd_build_error(score_only([](const Value& s, const ModArgs&) { return cumsum(s, 1); })),
                  {"cannot differentiate op 'scan sum'"});
}

TEST(AttentionModBwdErrors, TheBackwardApiRejectsAModItCannotDifferentiateBeforeAnyGpuWork) {
  Call c = valid_mod_call();
  c.options.mods.score[0].fn = [](const Value& s, const ModArgs&) { return s + min(s, 1, true); };
  attention::BackwardOptions b;
  static_cast<attention::AttentionOptions&>(b) = c.options;
  const Grads g = grads_for(c);
  const std::string msg = user_error([&] {
    (void)attention::validate_attention_bwd_args(c.q, c.k, c.v, c.o, *c.lse, g.dout, g.dq, g.dk, g.dv, b);
  });
  expect_mentions(
      msg, {"attention::backward: options.mods:", "score_mod 'alibi': cannot differentiate op 'reduce min'"});
}

TEST(AttentionModBwdErrors, AModTensorUnderAGradient) {
  Call c = valid_mod_call();
  attention::BackwardOptions b;
  static_cast<attention::AttentionOptions&>(b) = c.options;
  const Grads g = grads_for(c, 0x60000000 - 64); // dk's bytes cover alibi_slopes
  const std::string msg = user_error([&] {
    (void)attention::validate_attention_bwd_args(c.q, c.k, c.v, c.o, *c.lse, g.dout, g.dq, g.dk, g.dv, b);
  });
  expect_mentions(
      msg, {"attention::backward:", "mod tensor 'alibi_slopes'", "overlaps dk", "apart from the gradients"});
}

} // namespace
