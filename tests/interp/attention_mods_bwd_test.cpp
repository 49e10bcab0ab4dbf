// The attention backward with mods in the interpreter: every library mod and the combinations of the
// forward's mod cases, dQ, dK, dV against the double-precision gradients with the same mods
// (attention_mods_bwd_cases.h); the atomic-dQ variant; the reference itself against finite differences of the
// forward with mods; a mod's own derivative used instead of the builder's; the backward kernels named after
// the mods.
#include "interp/attention_mods_bwd_cases.h"

#include "dsl/dsl.h"
#include "dsl/printer.h"
#include "kernels/attention/fa2_bwd_dkdv.h"
#include "kernels/attention/fa2_bwd_dq.h"

#include <cmath>

using namespace kiln;
using namespace kiln::testing_support;

namespace {

class ModsBwdInterp : public ::testing::TestWithParam<ModCase> {};

TEST_P(ModsBwdInterp, GradientsMatchTheReferenceWithTheSameMods) {
  check_mod_bwd_case(GetParam(), mod_case_bwd_configs(GetParam()));
}

INSTANTIATE_TEST_SUITE_P(mods_bwd, ModsBwdInterp, ::testing::ValuesIn(mod_bwd_cases()),
                         [](const auto& info) { return info.param.name; });

// dQ accumulated by atomics in the dK/dV kernel (ATOMIC_DQ=1) through the same modded dS.
TEST(AttentionModsBwd, AtomicDqMatchesTheReference) {
  for (const ModCase& c : mod_bwd_cases()) {
    if (c.name != "bwd_document_window_softcap_tight" && c.name != "alibi_builtin_causal_br" &&
        c.name != "bwd_sinks_bias_softcap")
      continue;
    SCOPED_TRACE(c.name);
    check_mod_bwd_case(c, mod_case_bwd_configs(c, /*atomic_dq=*/true));
  }
}

// PERSISTENT=1 (programs numbered along x alone) with mods that read per-batch and per-head tensors (document ids, a
// bias, sinks) and a causal score mod chain: each program finds its batch, head and tile from the one-dimensional
// id, deterministic and fused.
TEST(AttentionModsBwd, PersistentNumberingMatchesTheReference) {
  int checked = 0;
  for (const ModCase& c : mod_bwd_cases()) {
    if (c.name != "bwd_document_window_softcap_tight" && c.name != "bwd_alibi_then_softcap_causal_tl_f32" &&
        c.name != "bwd_sinks_bias_softcap")
      continue;
    SCOPED_TRACE(c.name);
    ++checked;
    for (bool atomic : {false, true}) {
      AttentionBwdConfigs configs = mod_case_bwd_configs(c, atomic);
      configs.dkdv.set("PERSISTENT", 1);
      configs.dq.set("PERSISTENT", 1);
      check_mod_bwd_case(c, configs);
    }
  }
  EXPECT_EQ(checked, 3);
}

// The analytic reference with mods (the score mods' derivative by central differences of their references,
// sinks through LSE) against central differences of the forward with mods: d/dx Σ O ∘ dO.
TEST(AttentionModsBwd, TheReferenceMatchesFiniteDifferencesOfTheForwardWithMods) {
  AttentionProblem p;
  p.B = 1, p.H = 2, p.H_KV = 1, p.N_Q = 6, p.N_K = 5, p.D = 3;
  p.dtype = DType::f32;
  AttentionMods mods;
  mods.score = {softcap(2), alibi()};
  mods.mask = {sliding_window(3, 1)};
  mods.sink = {attention_sinks()};
  ModTensorValues tensors = {{"alibi_slopes", alibi_slopes(p)}, {"sinks", sink_logits(p, {0.3, -0.5})}};
  AttentionInputs in = make_inputs(p, 21, 1.5);
  HostBuffer dout = make_dout(p, 22, 1.0);
  AttentionGrads g = reference_backward_with_mods(p, in, dout, mods, tensors);
  AttentionTensors64 t = logical_bwd_tensors(p, in, dout);
  // The loss on perturbed logical tensors: written back into the inputs (f32 holds the perturbation exactly
  // enough at h = 1e-3, whose truncation error is far below the tolerance).
  auto loss = [&](const AttentionTensors64& x) {
    AttentionInputs moved = in;
    const AttentionStrides s = attention_strides(p);
    for (int64_t h = 0; h < p.H; ++h)
      for (int64_t i = 0; i < p.N_Q; ++i)
        for (int64_t d = 0; d < p.D; ++d)
          moved.q.set(element_offset(s.q, 0, h, i, d), x.q[static_cast<size_t>((h * p.N_Q + i) * p.D + d)]);
    for (int64_t j = 0; j < p.N_K; ++j)
      for (int64_t d = 0; d < p.D; ++d) {
        moved.k.set(element_offset(s.k, 0, 0, j, d), x.k[static_cast<size_t>(j * p.D + d)]);
        moved.v.set(element_offset(s.k, 0, 0, j, d), x.v[static_cast<size_t>(j * p.D + d)]);
      }
    AttentionResult r = reference_with_mods(p, moved, mods, tensors);
    double l = 0;
    for (size_t i = 0; i < r.o.size(); ++i)
      l += r.o[i] * x.dout[i];
    return l;
  };
  const double h = 1e-3;
  auto check = [&](std::vector<double> AttentionTensors64::*field, const std::vector<double>& grad,
                   const char* name) {
    for (size_t i = 0; i < grad.size(); ++i) {
      AttentionTensors64 plus = t, minus = t;
      (plus.*field)[i] += h;
      (minus.*field)[i] -= h;
      const double fd = (loss(plus) - loss(minus)) / (2 * h);
      EXPECT_NEAR(grad[i], fd, 2e-4 * (1 + std::abs(fd))) << name << "[" << i << "]";
    }
  };
  check(&AttentionTensors64::q, g.dq, "dQ");
  check(&AttentionTensors64::k, g.dk, "dK");
  check(&AttentionTensors64::v, g.dv, "dV");
}

// A score mod the builder cannot differentiate (a row max: not elementwise) runs the backward with the
// derivative it gives; here the row max is multiplied by 0, so the mod is s / 4 + 1 and its derivative 1/4.
TEST(AttentionModsBwd, AModsOwnDerivativeIsUsed) {
  ScoreMod quarter{"quarter_plus_row_max_times_0",
                   {},
                   [](const Value& s, const ModArgs&) { return s * 0.25 + 1.0 + max(s, 1, true) * 0.0; },
                   [](double s, const ModPoint&) { return s * 0.25 + 1.0; }};
  quarter.derivative = [](const Value&, const ModArgs&) { return scalar(0.25, f32); };
  AttentionCase base = make_case(40, 50, 32, 0, DType::f32, 2, 1);
  ModCase c = mod_case("own_derivative", base, {quarter}, {causal_mask(false)});
  check_mod_bwd_case(c, mod_case_bwd_configs(c));
}

// The backward kernels are named after the mods, as the forward is: two mods never share a binary or a tuning
// entry. Without mods, the built-in kernels, unchanged.
TEST(AttentionModsBwd, TheBackwardKernelsAreNamedAfterTheMods) {
  AttentionMods a, b;
  a.score = {softcap(30)};
  b.score = {softcap(20)};
  EXPECT_EQ(fa2_bwd_dkdv_def(AttentionMods{}).name, "fa2_bwd_dkdv");
  EXPECT_EQ(fa2_bwd_dq_def(AttentionMods{}).name, "fa2_bwd_dq");
  EXPECT_EQ(fa2_bwd_dkdv_def(a).name, "fa2_bwd_dkdv[" + a.identity() + "]");
  EXPECT_EQ(fa2_bwd_dq_def(a).name, "fa2_bwd_dq[" + a.identity() + "]");
  EXPECT_NE(fa2_bwd_dq_def(a).name, fa2_bwd_dq_def(b).name);
  AttentionProblem p;
  EXPECT_EQ(print_kernel(build_fa2_bwd_dq_with_mods(default_bwd_configs(p).dq, AttentionMods{})),
            print_kernel(build_fa2_bwd_dq(default_bwd_configs(p).dq)));
}

// With a mask mod, dQ visits only the key tiles the forward visits (mod_key_tiles): V past the window is NaN,
// which a visited tile would spread into dQ through dP, yet dQ is finite.
TEST(AttentionModsBwd, DqSkipsKeyTilesOutsideTheKeyBounds) {
  AttentionProblem p = make_case(16, 128, 32, 0, DType::f32).problem;
  AttentionInputs in = make_inputs(p, 3, 1.0);
  HostBuffer dout = make_dout(p, 4, 1.0);
  AttentionMods mods;
  mods.mask = {sliding_window(8, 0)};
  AttentionGrads ref = reference_backward_with_mods(p, in, dout, mods, {});
  for (int64_t j = 16; j < p.N_K; ++j)
    for (int64_t d = 0; d < p.D; ++d)
      in.v.set(j * p.D + d, std::nan(""));
  AttentionBwdConfigs configs = default_bwd_configs(p);
  configs.dq.set("BLOCK_M", 16).set("BLOCK_N", 16);
  configs.dkdv.set("BLOCK_M", 16).set("BLOCK_N", 16);
  AttentionGrads out = run_bwd_with_mods(p, mods, {}, configs, in, dout);
  Comparison dq = compare_to_reference(out.dq, ref.dq, ref.dq_magnitude);
  EXPECT_TRUE(dq.ok(1e-5)) << dq.str();
}

// With a mask mod's key bounds, dK/dV skips the query tiles whose key tiles (mod_key_tiles) miss its own: dO of
// rows 64.. is NaN, which a visited query tile would spread into dK and dV of keys those rows never see
// (0 · NaN), yet the keys only rows 0..55 see (under a causal window of 8) get finite, right gradients.
TEST(AttentionModsBwd, DkDvSkipsQueryTilesOutsideTheKeyBounds) {
  AttentionProblem p = make_case(128, 128, 32, 0, DType::f32).problem;
  AttentionInputs in = make_inputs(p, 5, 1.0);
  HostBuffer dout = make_dout(p, 6, 1.0);
  for (int64_t i = 64; i < p.N_Q; ++i)
    for (int64_t d = 0; d < p.D; ++d)
      dout.set(i * p.D + d, std::nan(""));
  AttentionMods mods;
  mods.mask = {sliding_window(8, 0)};
  AttentionGrads ref = reference_backward_with_mods(p, in, dout, mods, {});
  AttentionBwdConfigs configs = default_bwd_configs(p);
  configs.dkdv.set("BLOCK_M", 16).set("BLOCK_N", 16);
  configs.dq.set("BLOCK_M", 16).set("BLOCK_N", 16);
  AttentionGrads out = run_bwd_with_mods(p, mods, {}, configs, in, dout);
  const size_t seen_by_early_rows = static_cast<size_t>(48 * p.D); // keys 0..47, in logical order
  auto head = [&](const std::vector<double>& x) {
    return std::vector<double>(x.begin(), x.begin() + static_cast<std::ptrdiff_t>(seen_by_early_rows));
  };
  Comparison dk = compare_to_reference(head(out.dk), head(ref.dk), head(ref.dk_magnitude));
  Comparison dv = compare_to_reference(head(out.dv), head(ref.dv), head(ref.dv_magnitude));
  EXPECT_TRUE(dk.ok(1e-5)) << "dK " << dk.str();
  EXPECT_TRUE(dv.ok(1e-5)) << "dV " << dv.str();
}

} // namespace

