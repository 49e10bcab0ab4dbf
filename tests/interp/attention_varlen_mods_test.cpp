// Attention mods over packed variable-length batches in the interpreter (attention_varlen_mods.h): every
// library mod and the combinations of attention_varlen_mods_cases.h, forward and backward (deterministic and
// atomic dQ), against the per-sequence double-precision reference with the same mods; one sequence packed
// against the dense kernel with the same mods, bit for bit (b, q_idx and kv_idx mean what they mean in a
// batch of one); the packed kernels' identity carrying the mods.
#include "interp/attention_varlen_mods_cases.h"

#include "kernels/attention/attention_varlen_defs.h"
#include "kernels/attention/fa2_bwd_dkdv.h"
#include "kernels/attention/fa2_bwd_dq.h"
#include "kernels/attention/fa2_bwd_varlen.h"
#include "kernels/attention/fa2_fwd.h"
#include "kernels/attention/fa2_fwd_varlen.h"

using namespace kiln;
using namespace kiln::testing_support;

namespace {

class VarlenModsInterp : public ::testing::TestWithParam<VarlenModCase> {};

TEST_P(VarlenModsInterp, ForwardMatchesThePerSequenceReferenceWithTheSameMods) {
  check_varlen_mod_case(GetParam(), varlen_case_config(GetParam().base));
}

TEST_P(VarlenModsInterp, BackwardMatchesThePerSequenceGradientsWithTheSameMods) {
  check_varlen_mod_bwd_case(GetParam(), varlen_bwd_case_configs(GetParam().base, /*atomic_dq=*/false));
}

INSTANTIATE_TEST_SUITE_P(varlen_mods, VarlenModsInterp, ::testing::ValuesIn(varlen_mod_cases()),
                         [](const auto& info) { return info.param.name; });

// dQ accumulated by atomics in the dK/dV kernel through the same modded dS.
TEST(VarlenModsBwd, AtomicDqMatchesThePerSequenceGradients) {
  for (const VarlenModCase& c : varlen_mod_cases()) {
    if (c.name != "document_window_softcap_gqa" && c.name != "sinks_causal_br_gqa")
      continue;
    SCOPED_TRACE(c.name);
    check_varlen_mod_bwd_case(c, varlen_bwd_case_configs(c.base, /*atomic_dq=*/true));
  }
}

// One sequence packed is the dense problem in bshd layout (batch 0): with the same mods, the packed kernels
// compute it with the same operations, so forward and gradients agree exactly.
TEST(VarlenModsKernel, OneSequenceEqualsTheDenseKernelWithTheSameModsExactly) {
  VarlenProblem v;
  v.seqlens_q = {70};
  v.seqlens_k = {90};
  v.H = 4, v.H_KV = 2, v.D = 32;
  AttentionProblem d = v.shape();
  d.bshd_layout = true; // [1, N, H, D]: the packed layout of one sequence
  AttentionMods mods;
  mods.score = {alibi(), softcap(8)};
  mods.mask = {sliding_window(20, 0)};
  mods.sink = {attention_sinks()};
  const ModTensorValues tensors = {{"alibi_slopes", alibi_slopes(d)}, {"sinks", sink_logits(d, {0.5, -1.0})}};
  const AttentionInputs in = make_varlen_inputs(v, 31, 2.0);
  Config dense = default_fa2_config(d);
  dense.set("BLOCK_M", 32).set("BLOCK_N", 16);
  const AttentionResult a = run_fa2_with_mods(d, mods, tensors, dense, in);
  const AttentionResult b = run_fa2_varlen_with_mods(v, mods, tensors, varlen_config(dense), in);
  for (int64_t h = 0; h < v.H; ++h)
    for (int64_t i = 0; i < 70; ++i)
      for (int64_t e = 0; e < v.D; ++e)
        ASSERT_EQ(a.o[static_cast<size_t>((h * 70 + i) * v.D + e)],
                  b.o[static_cast<size_t>((i * v.H + h) * v.D + e)])
            << "head " << h << " row " << i;
  ASSERT_EQ(a.lse, b.lse);

  const HostBuffer dout = make_varlen_dout(v, 32, 1.0);
  AttentionBwdConfigs dense_bwd = default_bwd_configs(d);
  dense_bwd.dkdv.set("BLOCK_N", 32).set("BLOCK_M", 16);
  dense_bwd.dq.set("BLOCK_M", 32).set("BLOCK_N", 16);
  const AttentionGrads ga = run_bwd_with_mods(d, mods, tensors, dense_bwd, in, dout);
  const AttentionGrads gb =
      run_varlen_bwd_with_mods(v, mods, tensors,
                               {varlen_config_of(fa2_bwd_dkdv_varlen_def(), dense_bwd.dkdv),
                                varlen_config_of(fa2_bwd_dq_varlen_def(), dense_bwd.dq)},
                               in, dout);
  // Dense gradients are gathered [B, heads, N, D], packed ones [N, heads, D].
  auto packed = [&](const std::vector<double>& g, int64_t heads, int64_t n) {
    std::vector<double> out(g.size());
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t e = 0; e < v.D; ++e)
          out[static_cast<size_t>((i * heads + h) * v.D + e)] = g[static_cast<size_t>((h * n + i) * v.D + e)];
    return out;
  };
  EXPECT_EQ(packed(ga.dq, v.H, 70), gb.dq);
  EXPECT_EQ(packed(ga.dk, v.H_KV, 90), gb.dk);
  EXPECT_EQ(packed(ga.dv, v.H_KV, 90), gb.dv);
}

// The packed kernels with mods are defs of their own, named after the packed kernel and the mods' identity:
// they share no compiled kernel or tuning result with the dense kernels with the same mods or the packed
// kernels without mods, which stay what they are.
TEST(VarlenModsKernel, TheKernelsIdentityCarriesTheMods) {
  AttentionMods mods;
  mods.mask = {sliding_window(16, 0)};
  const std::string id = mods.identity();
  for (auto [with, without] : {std::pair{&fa2_fwd_varlen_def(mods), &fa2_fwd_varlen_def()},
                               {&fa2_bwd_dkdv_varlen_def(mods), &fa2_bwd_dkdv_varlen_def()},
                               {&fa2_bwd_dq_varlen_def(mods), &fa2_bwd_dq_varlen_def()}}) {
    EXPECT_EQ(with->name, without->name + "[" + id + "]");
    EXPECT_EQ(with->size_args, without->size_args);
    EXPECT_EQ(with->tuning_key, without->tuning_key);
  }
  EXPECT_NE(fa2_fwd_varlen_def(mods).name, fa2_fwd_def(mods).name);
  EXPECT_EQ(&fa2_fwd_varlen_def(AttentionMods{}), &fa2_fwd_varlen_def());
  AttentionMods other;
  other.mask = {sliding_window(17, 0)};
  EXPECT_NE(fa2_fwd_varlen_def(other).name, fa2_fwd_varlen_def(mods).name);
}

} // namespace
