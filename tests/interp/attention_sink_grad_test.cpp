// The gradient of attention-sink logits in the interpreter (fa2_bwd_sink.h): per row and per head against the
// double-precision closed form (attention_sink_grad_cases.h), the closed form itself against central
// differences of the forward's loss, a user's per-row sink, and the kernel's errors.
#include "interp/attention_sink_grad_cases.h"

#include "kernels/attention/fa2_bwd_sink.h"

#include <cmath>

using namespace kiln;
using namespace kiln::testing_support;

namespace {

class SinkGradInterp : public ::testing::TestWithParam<ModCase> {};

TEST_P(SinkGradInterp, PerRowAndPerHeadMatchTheClosedForm) { check_sink_grad_case(GetParam()); }

INSTANTIATE_TEST_SUITE_P(sink_grad, SinkGradInterp, ::testing::ValuesIn(sink_grad_cases()),
                         [](const auto& info) { return info.param.name; });

// Σ O ∘ dO of the reference forward with the mods.
double reference_loss(const AttentionProblem& p, const AttentionInputs& in, const HostBuffer& dout,
                      const AttentionMods& mods, const ModTensorValues& tensors) {
  const AttentionResult r = reference_with_mods(p, in, mods, tensors);
  const AttentionTensors64 t = logical_bwd_tensors(p, in, dout);
  double loss = 0;
  for (size_t i = 0; i < r.o.size(); ++i)
    loss += r.o[i] * t.dout[i];
  return loss;
}

// The library's per-head sinks: d loss / d sinks[h] by central differences of the reference loss equals the
// per-row closed form summed over batch and rows; with a causal window whose first rows see one key, and a
// bottom-right causal rule under which the first rows see none (their gradient is 0: O = 0 whatever the
// sink).
TEST(AttentionSinkGrad, TheClosedFormMatchesFiniteDifferencesPerHead) {
  for (int causal : {1, 2}) {
    SCOPED_TRACE(causal);
    AttentionProblem p;
    p.B = 2, p.H = 3, p.H_KV = 1, p.N_Q = 9, p.N_K = causal == 2 ? 5 : 9, p.D = 4;
    p.dtype = DType::f32;
    p.causal = causal;
    AttentionMods mods;
    mods.mask = {sliding_window(3, 0)};
    mods.sink = {attention_sinks()};
    ModTensorValues tensors = {{"sinks", sink_logits(p, {0.3, -0.5, 1.2})}};
    AttentionInputs in = make_inputs(p, 31, 1.5);
    HostBuffer dout = make_dout(p, 32, 1.0);
    const std::vector<double> rows = reference_sink_gradient(p, in, dout, mods, tensors);
    const std::vector<double> heads = per_head_sums(p, rows);
    const double step = 1e-4;
    for (int64_t h = 0; h < p.H; ++h) {
      ModTensorValues plus = tensors, minus = tensors;
      const double s = tensors.at("sinks").data.get(h);
      plus.at("sinks").data.set(h, s + step);
      minus.at("sinks").data.set(h, s - step);
      // The f32 tensor rounds the perturbed logits: divide by the step it holds.
      const double held = plus.at("sinks").data.get(h) - minus.at("sinks").data.get(h);
      const double fd =
          (reference_loss(p, in, dout, mods, plus) - reference_loss(p, in, dout, mods, minus)) / held;
      EXPECT_NEAR(heads[static_cast<size_t>(h)], fd, 1e-5 * (1 + std::abs(fd))) << "head " << h;
    }
    if (causal == 2) { // rows 0..3 see no key under the bottom-right rule (N_Q − N_K = 4)
      for (int64_t b = 0; b < p.B; ++b)
        for (int64_t h = 0; h < p.H; ++h)
          for (int64_t i = 0; i < 4; ++i) {
            EXPECT_EQ(rows[static_cast<size_t>((b * p.H + h) * p.N_Q + i)], 0.0) << b << " " << h << " " << i;
          }
    }
  }
}

// A user's sink that is not per head: one logit per row, row_sinks[b, h, q_idx] (f32 [B, H, N_Q]). The
// per-row gradient is d loss / d row_sinks, checked element by element by central differences, and the kernel
// gives it.
SinkMod row_sinks() {
  SinkMod m;
  m.name = "row_sinks";
  m.tensors = {{"row_sinks", DType::f32, {"B", "H", "N_Q"}}};
  m.fn = [](const ModArgs& a) { return a.load("row_sinks", {a.b, a.h, a.q_idx}); };
  m.reference = [](const ModPoint& pt) { return pt.at("row_sinks", {pt.b, pt.h, pt.q_idx}); };
  return m;
}

TEST(AttentionSinkGrad, AUsersPerRowSinkGetsItsPerRowGradient) {
  AttentionProblem p;
  p.B = 2, p.H = 2, p.H_KV = 2, p.N_Q = 7, p.N_K = 6, p.D = 4;
  p.dtype = DType::f32;
  AttentionMods mods;
  mods.sink = {row_sinks()};
  ModTensorData t = contiguous_mod_tensor(DType::f32, {p.B, p.H, p.N_Q}, "row_sinks");
  for (int64_t i = 0; i < t.data.numel(); ++i)
    t.data.set(i, std::sin(0.7 * static_cast<double>(i)) * 2.0);
  ModTensorValues tensors = {{"row_sinks", t}};
  AttentionInputs in = make_inputs(p, 41, 1.0);
  HostBuffer dout = make_dout(p, 42, 1.0);
  const std::vector<double> ref = reference_sink_gradient(p, in, dout, mods, tensors);
  const double step = 1e-4;
  for (int64_t i = 0; i < t.data.numel(); ++i) {
    ModTensorValues plus = tensors, minus = tensors;
    plus.at("row_sinks").data.set(i, t.data.get(i) + step);
    minus.at("row_sinks").data.set(i, t.data.get(i) - step);
    const double held = plus.at("row_sinks").data.get(i) - minus.at("row_sinks").data.get(i);
    const double fd =
        (reference_loss(p, in, dout, mods, plus) - reference_loss(p, in, dout, mods, minus)) / held;
    EXPECT_NEAR(ref[static_cast<size_t>(i)], fd, 1e-5 * (1 + std::abs(fd))) << "row " << i;
  }
  const std::vector<double> got = run_bwd_sink_gradient(p, mods, tensors, in, dout, false);
  const Comparison c = compare_to_reference(got, ref);
  EXPECT_TRUE(c.ok(1e-5)) << c.str();
}

TEST(AttentionSinkGrad, TheKernelIsNamedAfterTheModsAndNeedsASink) {
  AttentionMods mods;
  mods.sink = {attention_sinks()};
  EXPECT_EQ(fa2_bwd_sink_def(mods).name, "fa2_bwd_sink[" + mods.identity() + "]");
  AttentionMods none;
  none.score = {softcap(30)};
  try {
    (void)fa2_bwd_sink_def(none);
    FAIL() << "expected a kiln::Error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("have no sink; expected a SinkMod"), std::string::npos) << e.what();
  }
}

} // namespace
