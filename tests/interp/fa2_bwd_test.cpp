// The attention backward (preprocess, dK/dV, dQ, and the atomic-dQ variant) in the interpreter over the
// shared attention sweep, against the analytic double-precision gradients; and those gradients themselves
// against central finite differences of the double forward.
#include "attention_bwd_test_cases.h"

#include "dsl/printer.h"
#include "kernels/attention/fa2_bwd_dkdv.h"
#include "kernels/attention/fa2_bwd_dq.h"

#include <cmath>

using namespace kiln;
using namespace kiln::testing_support;

namespace {

class Fa2BwdInterp : public ::testing::TestWithParam<AttentionCase> {};

TEST_P(Fa2BwdInterp, MatchesReference) { check_bwd_case(GetParam(), interp_bwd_configs(GetParam(), false)); }

INSTANTIATE_TEST_SUITE_P(fa2_bwd, Fa2BwdInterp, ::testing::ValuesIn(attention_sweep()),
                         [](const auto& info) { return attention_case_name(info.param); });

// The atomic variant accumulates dQ in f32 inside dK/dV and converts it afterwards: same gradients.
TEST(Fa2BwdKernel, AtomicDqMatchesReference) {
  for (const AttentionCase& c : masking_strategy_cases()) {
    SCOPED_TRACE(attention_case_name(c));
    check_bwd_case(c, interp_bwd_configs(c, true));
  }
}

// The atomic variant adds dQ's partial through a block pointer (which sm_90a stages and reduces in bulk): D = 96
// in two pieces of the head dim, and the warp-specialised kernel.
TEST(Fa2BwdKernel, AtomicDqOverHeadDimPiecesAndWarpSpecialized) {
  const AttentionCase pieces = make_case(50, 70, 96, 2, f16, 2, 1);
  check_bwd_case(pieces, interp_bwd_configs(pieces, true));
  const AttentionCase c = make_case(100, 70, 64, 1, f16, 3, 3);
  AttentionBwdConfigs configs = interp_bwd_configs(c, true);
  configs.dkdv.set("WARP_SPECIALIZE", 1);
  check_bwd_case(c, configs);
}

// Rows with no visible key (bottom-right causal, N_Q > N_K) get dQ = 0 exactly, and keys no row sees get
// dK = dV = 0 (top-left causal, N_K > N_Q), never NaN: check_bwd_case asserts exact zeros where the
// reference has them; here the shapes are chosen so that there are many.
TEST(Fa2BwdKernel, RowsAndKeysThatSeeNothingGetZeroGradients) {
  for (const AttentionCase& c : {make_case(100, 17, 64, 2, f16, 2, 1), make_case(17, 100, 32, 1, bf16, 2, 2)}) {
    SCOPED_TRACE(attention_case_name(c));
    AttentionGrads g = check_bwd_case(c, interp_bwd_configs(c, false));
    for (double x : g.dq)
      ASSERT_TRUE(std::isfinite(x));
  }
}

// EXACT_MASKED_V=1: a NaN in V at a key hidden from rows inside the tiles their programs visit does not reach their
// dQ.
TEST(Fa2BwdKernel, HiddenNanValueDoesNotReachTheRowsThatDoNotSeeIt) {
  for (DType dt : {DType::f16, DType::bf16, DType::f32}) {
    SCOPED_TRACE(dtype_name(dt));
    check_bwd_hidden_nan_value(dt, [](const AttentionCase& c) { return interp_bwd_configs(c, false); });
    check_bwd_hidden_nan_value(dt, [](const AttentionCase& c) { return interp_bwd_configs(c, true); });
  }
}

// WARP_SPECIALIZE=1 (dK/dV without the loop over a group's query heads, for one query head a kv head): the same
// gradients, and the kernel has no loop around its query loops. Over several heads, both causal alignments and
// tails, in the interpreter (the GPU runs it warp-specialised: GpuFa2BwdLarge.WarpSpecializedDkdvMatchesTheReference).
TEST(Fa2BwdKernel, WarpSpecializedDkdvMatchesReference) {
  for (const AttentionCase& c : {make_case(100, 70, 64, 1, f16, 3, 3), make_case(70, 100, 32, 2, bf16, 2, 2)}) {
    SCOPED_TRACE(attention_case_name(c));
    for (bool atomic : {false, true}) { // and the fused backward: dQ added by dK/dV
      SCOPED_TRACE(atomic ? "ATOMIC_DQ=1" : "ATOMIC_DQ=0");
      AttentionBwdConfigs configs = interp_bwd_configs(c, atomic);
      configs.dkdv.set("WARP_SPECIALIZE", 1);
      check_bwd_case(c, configs);
      int nested = 0;
      walk(build_fa2_bwd_dkdv(configs.dkdv).body, [&](const Op& op) {
        if (op.kind == OpKind::For)
          walk(op.regions[0], [&](const Op& inner) { nested += inner.kind == OpKind::For; });
      });
      EXPECT_EQ(nested, 0) << "every loop at the top of the kernel";
    }
  }
}

// PERSISTENT=1 numbers dK/dV's programs along x alone (key tile p % tiles of batch·kv head p / tiles) and dQ's too
// (query_tile_program), which is what a persistent grid walks. The interpreter runs the one-dimensional grid the
// launch gives: the same gradients over several batches and heads, GQA, both causal alignments (which the tuner
// prunes, but a user may ask for), tails and f32, deterministic and fused.
TEST(Fa2BwdKernel, PersistentNumberingMatchesReference) {
  for (AttentionCase c : masking_strategy_cases()) {
    c.problem.B = 3;
    SCOPED_TRACE(attention_case_name(c));
    for (bool atomic : {false, true}) {
      SCOPED_TRACE(atomic ? "ATOMIC_DQ=1" : "ATOMIC_DQ=0");
      AttentionBwdConfigs configs = interp_bwd_configs(c, atomic);
      configs.dkdv.set("PERSISTENT", 1);
      configs.dq.set("PERSISTENT", 1);
      check_bwd_case(c, configs);
    }
  }
  AttentionProblem p;
  p.B = 3;
  p.H = 4;
  p.H_KV = 2;
  p.N_Q = 300;
  p.N_K = 100;
  AttentionBwdConfigs configs = default_bwd_configs(p, false);
  configs.dkdv.set("BLOCK_N", 64).set("PERSISTENT", 1);
  configs.dq.set("BLOCK_M", 64).set("PERSISTENT", 1);
  const SizeArgs sizes = attention_size_args(p);
  EXPECT_EQ(fa2_bwd_dkdv_def().grid(configs.dkdv, sizes), (Grid{12, 1, 1})); // 2 key tiles x 3 x 2 kv heads
  EXPECT_EQ(fa2_bwd_dq_def().grid(configs.dq, sizes), (Grid{60, 1, 1}));     // 5 query tiles x 3 x 4 heads
  configs.dkdv.set("PERSISTENT", 0);
  EXPECT_EQ(fa2_bwd_dkdv_def().grid(configs.dkdv, sizes), (Grid{2, 6, 1}));
}

// GQA: one dK/dV program sums over the group's query heads, in a loop (no atomics).
TEST(Fa2BwdKernel, DkDvLoopsOverTheGroupsQueryHeads) {
  AttentionProblem p;
  p.causal = 1;
  Kernel k = build_fa2_bwd_dkdv(default_bwd_configs(p).dkdv);
  int loops = 0, dots = 0, atomics = 0;
  walk(k.body, [&](const Op& op) {
    loops += op.kind == OpKind::For;
    dots += op.kind == OpKind::Dot;
    atomics += op.kind == OpKind::AtomicAdd;
  });
  EXPECT_EQ(loops, 4) << "the group loop around the masked, unmasked and tail query loops\n" << print_kernel(k);
  EXPECT_EQ(dots, 12) << "four products per step, three loops\n" << print_kernel(k);
  EXPECT_EQ(atomics, 0) << print_kernel(k);
}

// The analytic reference against central differences of the double forward: d/dx Σ O ∘ dO.
TEST(Fa2BwdReference, MatchesFiniteDifferencesOfTheForward) {
  for (int causal : {0, 1, 2}) {
    AttentionProblem p;
    p.H = 2;
    p.H_KV = 1;
    p.N_Q = 5;
    p.N_K = 4;
    p.D = 3;
    p.causal = causal;
    p.dtype = DType::f32;
    AttentionInputs in = make_inputs(p, 7 + causal, 1.5);
    HostBuffer dout = make_dout(p, 11 + causal, 1.0);
    AttentionTensors64 t = logical_bwd_tensors(p, in, dout);
    AttentionGrads g = reference_backward(p, t);
    auto loss = [&](const AttentionTensors64& x) {
      AttentionResult r = reference_forward(p, x);
      double l = 0;
      for (size_t i = 0; i < r.o.size(); ++i)
        l += r.o[i] * x.dout[i];
      return l;
    };
    const double h = 1e-5;
    auto check = [&](std::vector<double> AttentionTensors64::*field, const std::vector<double>& grad, const char* name) {
      for (size_t i = 0; i < grad.size(); ++i) {
        AttentionTensors64 plus = t, minus = t;
        (plus.*field)[i] += h;
        (minus.*field)[i] -= h;
        const double fd = (loss(plus) - loss(minus)) / (2 * h);
        EXPECT_NEAR(grad[i], fd, 1e-7 * (1 + std::abs(fd))) << name << "[" << i << "] causal " << causal;
      }
    };
    check(&AttentionTensors64::q, g.dq, "dQ");
    check(&AttentionTensors64::k, g.dk, "dK");
    check(&AttentionTensors64::v, g.dv, "dV");
  }
}

} // namespace
