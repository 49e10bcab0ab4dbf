// Attention mods (attention_mods.h) in the interpreter: every library mod and a combination against the
// double-precision reference with the same mods (attention_mods_cases.h); causal as a mask mod against the
// built-in causal path; key tiles outside the mods' key bounds never visited; a user's own mod reading a
// tensor; the kernel's identity (name, IR hash) and the default path's code untouched by the mods' existence.
#include "interp/attention_mods_cases.h"

#include "dsl/dsl.h"
#include "dsl/printer.h"
#include "kernels/attention/attention_mod_spec.h"
#include "kernels/attention/fa2_fwd.h"

using namespace kiln;
using namespace kiln::testing_support;

namespace {

class ModsInterp : public ::testing::TestWithParam<ModCase> {};

TEST_P(ModsInterp, MatchesTheReferenceWithTheSameMods) {
  const ModCase& c = GetParam();
  check_mod_case(c, mod_case_config(c));
}

INSTANTIATE_TEST_SUITE_P(mods, ModsInterp, ::testing::ValuesIn(mod_cases()),
                         [](const auto& info) { return info.param.name; });

// Every key tile visited, masked (MASK_EVERY_TILE=1), computes what the mods' own key loop does.
TEST(AttentionMods, MaskingEveryTileGivesTheSameResults) {
  for (const ModCase& c : mod_cases()) {
    if (c.name != "document_window_softcap" && c.name != "alibi_builtin_causal_br")
      continue;
    Config config = mod_case_config(c);
    config.set("MASK_EVERY_TILE", 1);
    SCOPED_TRACE(c.name);
    check_mod_case(c, config);
  }
}

// LAZY_RESCALE=1 (a running max that moves by jumps past 2^8): every mod case, sinks and softcaps among them, matches
// the reference as without it.
TEST(AttentionMods, LazyRescaleGivesTheSameResults) {
  for (const ModCase& c : mod_cases()) {
    Config config = mod_case_config(c);
    config.set("LAZY_RESCALE", 1);
    SCOPED_TRACE(c.name);
    check_mod_case(c, config);
  }
}

// On the one-dimensional grid of PERSISTENT=1 (query_tile_program), mods that read per-batch and per-head tensors
// and masks whose later rows see more (launched heaviest first) still find their batch, head and rows.
TEST(AttentionMods, PersistentNumberingGivesTheSameResults) {
  int ran = 0;
  for (const ModCase& c : mod_cases()) {
    if (c.name != "document_window_softcap" && c.name != "alibi_builtin_causal_br")
      continue;
    Config config = mod_case_config(c);
    config.set("PERSISTENT", 1);
    SCOPED_TRACE(c.name);
    check_mod_case(c, config);
    ++ran;
  }
  EXPECT_EQ(ran, 2);
}

// The causal mask mods give what CAUSAL=1 and CAUSAL=2 give (same arithmetic: equal to rounding).
TEST(AttentionMods, CausalMaskModsMatchTheBuiltInCausalPath) {
  for (bool bottom_right : {false, true})
    for (auto [nq, nk] : {std::pair<int64_t, int64_t>{100, 100}, {17, 100}, {100, 17}}) {
      AttentionCase c = make_case(nq, nk, 64, 0, DType::f32, 2, 1); // f32: the paths differ only in rounding
      AttentionInputs in = make_inputs(c.problem, 7, 1.0);
      AttentionMods mods;
      mods.mask = {causal_mask(bottom_right)};
      Config config = default_fa2_config(c.problem);
      config.set("BLOCK_M", 32).set("BLOCK_N", 16);
      AttentionResult modded = run_fa2_with_mods(c.problem, mods, {}, config, in);
      AttentionProblem builtin = c.problem;
      builtin.causal = bottom_right ? 2 : 1;
      Config bconfig = default_fa2_config(builtin);
      bconfig.set("BLOCK_M", 32).set("BLOCK_N", 16);
      AttentionResult ref = run_fa2_interpreted(builtin, bconfig, in);
      SCOPED_TRACE(fmt::format("{} {}x{}", bottom_right ? "bottom-right" : "top-left", nq, nk));
      Comparison o = compare_to_reference(modded.o, ref.o);
      EXPECT_TRUE(o.ok(1e-5)) << o.str();
      for (size_t i = 0; i < ref.lse.size(); ++i) {
        if (std::isinf(ref.lse[i])) // a row that sees no key: -inf in both
          ASSERT_EQ(modded.lse[i], ref.lse[i]) << "row " << i;
        else
          ASSERT_NEAR(modded.lse[i], ref.lse[i], 1e-5 * (1 + std::abs(ref.lse[i]))) << "row " << i;
      }
    }
}

// A score mod that returns the scores it was given changes nothing: the kernels treat the scores as unmodded
// (unscaled until exp2's multiply, as with no mods), so a no-op mod costs what the built-in kernel costs. The
// probe sees through chains of no-ops, and not through a mod that computes anything.
TEST(AttentionMods, ANoOpScoreModLeavesTheScoresUnscaled) {
  const ScoreMod noop{"noop", {}, [](const Value& s, const ModArgs&) { return s; }, {}};
  AttentionMods none_changing, changing;
  none_changing.score = {noop, noop};
  changing.score = {noop, softcap(30), noop};
  EXPECT_TRUE(none_changing.score_mods_return_their_input());
  EXPECT_FALSE(changing.score_mods_return_their_input());
  EXPECT_FALSE(AttentionMods{}.score_mods_return_their_input()) << "no score mods";
  const ScoreMod plus_zero{"plus_zero", {}, [](const Value& s, const ModArgs&) { return s + 0.0; }, {}};
  AttentionMods computing;
  computing.score = {plus_zero};
  EXPECT_FALSE(computing.score_mods_return_their_input()) << "an op, even one that changes no value";

  // The no-op's kernel multiplies the scores as often as the kernel without mods does: sm_scale · log2 e once.
  AttentionProblem p = make_case(100, 100, 64, 0, DType::f32, 2, 1).problem;
  Config config = default_fa2_config(p);
  config.set("BLOCK_M", 32).set("BLOCK_N", 16);
  auto multiplies = [](const Kernel& k) {
    const std::string ir = print_kernel(k);
    size_t n = 0;
    for (size_t at = ir.find(" mul "); at != std::string::npos; at = ir.find(" mul ", at + 1))
      ++n;
    return n;
  };
  EXPECT_EQ(multiplies(build_fa2_fwd_with_mods(config, none_changing)),
            multiplies(build_fa2_fwd_with_mods(config, AttentionMods{})));
  EXPECT_GT(multiplies(build_fa2_fwd_with_mods(config, computing)),
            multiplies(build_fa2_fwd_with_mods(config, AttentionMods{})));

  // And it computes what the kernel without mods computes (f32: equal to rounding).
  AttentionInputs in = make_inputs(p, 11, 1.0);
  AttentionResult modded = run_fa2_with_mods(p, none_changing, {}, config, in);
  AttentionResult plain = run_fa2_interpreted(p, config, in);
  Comparison o = compare_to_reference(modded.o, plain.o);
  EXPECT_TRUE(o.ok(1e-6)) << o.str();
}

// Key tiles outside the key bounds are never read: V there is NaN, which a visited tile would spread into O
// (p = 0 times NaN), yet O is finite and right.
TEST(AttentionMods, KeyTilesOutsideTheKeyBoundsAreNeverVisited) {
  // One Q tile (rows 0..15) under a causal window: keys past 15 lie beyond every row's window.
  AttentionProblem p = make_case(16, 128, 32, 0, DType::f32).problem;
  AttentionInputs in = make_inputs(p, 3, 1.0);
  for (int64_t j = 16; j < p.N_K; ++j)
    for (int64_t d = 0; d < p.D; ++d)
      in.v.set(j * p.D + d, std::nan(""));
  AttentionMods mods;
  mods.mask = {sliding_window(8, 0)};
  Config config = default_fa2_config(p);
  config.set("BLOCK_M", 16).set("BLOCK_N", 16);
  AttentionResult out = run_fa2_with_mods(p, mods, {}, config, in);
  AttentionResult ref = reference_with_mods(p, in, mods, {});
  EXPECT_TRUE(compare_to_reference(out.o, ref.o).ok(1e-5)) << compare_to_reference(out.o, ref.o).str();

  // A user's mask with a lower bound: keys below 100 hidden, tiles 0..5 (keys 0..95) skipped.
  MaskMod late{"keys_from_100",
               {},
               [](const ModArgs& m) { return m.kv_idx >= 100; },
               [](const ModPoint& m) { return m.kv_idx >= 100; },
               [](const ModArgs& m, const Value&, const Value&) {
                 return KeyBounds{scalar(100, i32), m.N_K};
               }};
  AttentionProblem p2 = make_case(40, 128, 32, 0, DType::f32).problem;
  AttentionInputs in2 = make_inputs(p2, 4, 1.0);
  for (int64_t j = 0; j < 96; ++j)
    for (int64_t d = 0; d < p2.D; ++d)
      in2.v.set(j * p2.D + d, std::nan(""));
  AttentionMods m2;
  m2.mask = {late};
  Config c2 = default_fa2_config(p2);
  c2.set("BLOCK_M", 16).set("BLOCK_N", 16);
  AttentionResult out2 = run_fa2_with_mods(p2, m2, {}, c2, in2);
  AttentionResult ref2 = reference_with_mods(p2, in2, m2, {});
  EXPECT_TRUE(compare_to_reference(out2.o, ref2.o).ok(1e-5)) << compare_to_reference(out2.o, ref2.o).str();
}

// With a sink, a row that sees no key gets O = 0 and LSE = its sink; a sink of -inf is no sink (LSE = -inf).
TEST(AttentionMods, RowsThatSeeNoKeyUnderASinkGiveZeroAndTheSink) {
  for (const ModCase& c : mod_cases()) {
    if (c.name != "sinks_causal_br_100x17_gqa")
      continue;
    const AttentionProblem& p = c.base.problem;
    AttentionResult out = run_fa2_with_mods(p, c.mods, c.tensors, mod_case_config(c), make_inputs(p, 5, 1.0));
    const HostBuffer& sinks = c.tensors.at("sinks").data;
    for (int64_t h = 0; h < p.H; ++h)
      for (int64_t i = 0; i < 83; ++i) { // bottom-right, N_Q - N_K = 83: rows 0..82 see no key
        const size_t row = static_cast<size_t>(h * p.N_Q + i);
        if (std::isinf(sinks.get(h)))
          ASSERT_EQ(out.lse[row], sinks.get(h)) << "h " << h << " row " << i;
        else
          ASSERT_NEAR(out.lse[row], sinks.get(h), 1e-6) << "h " << h << " row " << i;
        for (int64_t d = 0; d < p.D; ++d)
          ASSERT_EQ(out.o[row * static_cast<size_t>(p.D) + static_cast<size_t>(d)], 0.0)
              << "h " << h << " row " << i;
      }
  }
}

// A mod written in a few lines by a user: a per-(head, key) bias table read through ModArgs::load, with a
// relative-position term, composed with a library mask.
TEST(AttentionMods, AUserModReadingItsOwnTensor) {
  AttentionCase c = make_case(50, 70, 32, 0, DType::f16, 2, 1);
  const AttentionProblem& p = c.problem;
  ScoreMod table{"key_table",
                 {{"table", DType::f32, {"H", "N_K"}}},
                 [](const Value& s, const ModArgs& m) {
                   return s + m.load("table", {m.h, m.kv_idx}) - 0.01 * (m.q_idx - m.kv_idx).to(f32);
                 },
                 [](double s, const ModPoint& m) {
                   return s + m.at("table", {m.h, m.kv_idx}) - 0.01 * static_cast<double>(m.q_idx - m.kv_idx);
                 }};
  ModTensorData t = contiguous_mod_tensor(DType::f32, {p.H, p.N_K}, "table");
  for (int64_t i = 0; i < t.data.numel(); ++i)
    t.data.set(i, std::sin(static_cast<double>(i)));
  ModCase mc = mod_case("user_table", c, {table}, {prefix_lm(10)}, {{"table", t}});
  check_mod_case(mc, mod_case_config(mc));
}

TEST(AttentionMods, TheKernelIsNamedAfterTheModsAndTheirCode) {
  AttentionMods a, b, c;
  a.score = {softcap(30)};
  b.score = {softcap(20)};
  c.score = {softcap(30)};
  c.score[0].fn = [](const Value& s, const ModArgs&) { return 30.0 * tanh(s * (1.0 / 29.0)); }; // same name
  EXPECT_EQ(fa2_fwd_def(AttentionMods{}).name, "fa2_fwd");
  EXPECT_EQ(fa2_fwd_def(a).name.rfind("fa2_fwd[softcap(30)|#", 0), 0u) << fa2_fwd_def(a).name;
  EXPECT_EQ(a.identity(), AttentionMods(a).identity()) << "deterministic";
  EXPECT_NE(a.identity(), b.identity());
  EXPECT_NE(a.identity(), c.identity()) << "one name, different code: different kernels";
  EXPECT_NE(fa2_fwd_def(a).name, fa2_fwd_def(c).name);
  EXPECT_EQ(&fa2_fwd_def(a), &fa2_fwd_def(AttentionMods(a)))
      << "a copy of the mods reads the def built for them";
  AttentionMods d;
  d.mask = {document_mask(), sliding_window(4, 0)};
  EXPECT_EQ(d.name(), "|document,sliding_window(4,0)");
}

// fa2_fwd_def(mods) keeps one def per identity_key(): a function replaced in place, or another tensor, is
// another key and so another def (built anew, named after the new code), never the one kept for the old mods.
TEST(AttentionMods, ModsChangedAfterTheirDefWasBuiltGetADefOfTheirOwn) {
  AttentionMods m;
  m.score = {softcap(30)};
  const KernelDef& first = fa2_fwd_def(m);
  const std::string first_key = m.identity_key();
  m.score[0].fn = [](const Value& s, const ModArgs&) { return 30.0 * tanh(s * (1.0 / 29.0)); }; // same name
  EXPECT_NE(m.identity_key(), first_key);
  EXPECT_NE(fa2_fwd_def(m).name, first.name);
  AttentionMods with_tensor = m;
  with_tensor.score[0].tensors = {ModTensorSpec{"cap", DType::f32, {"H"}}};
  EXPECT_NE(with_tensor.identity_key(), m.identity_key());
  const std::string f32_key = with_tensor.identity_key();
  with_tensor.score[0].tensors[0].dtype = DType::f16;
  EXPECT_NE(with_tensor.identity_key(), f32_key);
}

// Copies of a mod's function share its id; every other function value has one of its own, and no function 0.
// The library's mods, whose names spell their parameters, are keyed by their names: built per call, they are
// one key (one def), while a user's function built again is another.
TEST(AttentionMods, ModFunctionIdsFollowTheFunctionValue) {
  auto user_cap = [] {
    ScoreMod m;
    m.name = "my_cap";
    m.fn = [](const Value& s, const ModArgs&) { return 30.0 * tanh(s * (1.0 / 30.0)); };
    return m;
  };
  const ScoreMod cap = user_cap();
  const ScoreMod copy = cap;
  EXPECT_NE(cap.fn.id(), 0u);
  EXPECT_EQ(copy.fn.id(), cap.fn.id());
  EXPECT_NE(user_cap().fn.id(), cap.fn.id()) << "built again: another function value";
  AttentionMods library_once, library_again;
  library_once.score = {softcap(30)};
  library_once.mask = {sliding_window(8, 0)};
  library_again.score = {softcap(30)};
  library_again.mask = {sliding_window(8, 0)};
  EXPECT_EQ(library_once.identity_key(), library_again.identity_key());
  EXPECT_EQ(&fa2_fwd_def(library_once), &fa2_fwd_def(library_again));
  library_again.score = {softcap(31)};
  EXPECT_NE(library_once.identity_key(), library_again.identity_key()) << "the name spells the parameter";
  EXPECT_EQ(MaskModFn().id(), 0u);
  EXPECT_FALSE(static_cast<bool>(MaskModFn()));
  // Names are written with their lengths: a bar inside a name cannot pass for the bar between two mods.
  AttentionMods one, two;
  one.score = {cap};
  one.score[0].name = "a|b";
  two.score = {cap};
  two.score[0].name = "a";
  two.mask = {MaskMod{"b", {}, nullptr, nullptr, nullptr}};
  EXPECT_NE(one.identity_key(), two.identity_key());
}

// The mods' kernel takes their tensors after the built-in arguments; without mods the kernel is unchanged.
TEST(AttentionMods, ModTensorsFollowTheBuiltInArguments) {
  AttentionProblem p;
  AttentionMods mods;
  mods.score = {alibi()};
  mods.mask = {document_mask()};
  Kernel k = fa2_fwd_def(mods).build(default_fa2_config(p));
  Kernel plain = build_fa2_fwd(default_fa2_config(p));
  ASSERT_EQ(k.params.size(), plain.params.size() + 8); // alibi: pointer + 1 stride; q_doc, kv_doc: 1 + 2 each
  const char* names[] = {"mod_alibi_slopes",  "mod_alibi_slopes_stride0", "mod_q_doc",
                         "mod_q_doc_stride0", "mod_q_doc_stride1",        "mod_kv_doc"};
  for (size_t i = 0; i < 6; ++i)
    EXPECT_EQ(k.params[plain.params.size() + i].name, names[i]);
  EXPECT_EQ(print_kernel(build_fa2_fwd_with_mods(default_fa2_config(p), AttentionMods{})),
            print_kernel(plain));
}

// The command line's spellings of the library mods build the same mods (same identity) as the C++ calls.
TEST(AttentionMods, ModsFromTheirCommandLineSpelling) {
  AttentionMods parsed, built;
  for (const char* text : {"causal", "causal=bottom-right", "sliding_window=64", "sliding_window=8,3",
                           "prefix_lm=5", "softcap=30", "alibi", "document", "bias=f16", "sinks"})
    add_mod_spec(parsed, text);
  built.mask = {causal_mask(false),   causal_mask(true), sliding_window(64, 0),
                sliding_window(8, 3), prefix_lm(5),      document_mask()};
  built.score = {softcap(30), alibi(), additive_bias(DType::f16)};
  built.sink = {attention_sinks()};
  EXPECT_EQ(parsed.name(), built.name());
  EXPECT_EQ(parsed.identity(), built.identity());
  EXPECT_EQ(parsed.name(),
            "softcap(30),alibi,bias(f16)|causal_top_left,causal_bottom_right,sliding_window(64,0),"
            "sliding_window(8,3),prefix_lm(5),document|sink:sinks");
}

} // namespace
