// The attention backward over packed variable-length sequences (fa2_bwd_varlen.h) in the interpreter: the
// shared varlen cases, deterministic and atomic dQ, against the per-sequence analytic gradients; one sequence
// bit for bit against the dense backward; offsets outside the tensors (the interpreter refuses any access
// outside a buffer).
#include "attention_varlen_bwd_cases.h"

#include "kernels/attention/attention_varlen_defs.h"
#include "kernels/attention/fa2_bwd_dkdv.h"
#include "kernels/attention/fa2_bwd_varlen.h"

using namespace kiln;
using namespace kiln::testing_support;

namespace {

class Fa2VarlenBwdInterp : public ::testing::TestWithParam<VarlenCase> {};

TEST_P(Fa2VarlenBwdInterp, MatchesPerSequenceGradients) {
  const VarlenCase& c = GetParam();
  check_varlen_bwd_case(c, varlen_bwd_case_configs(c, false));
}

TEST_P(Fa2VarlenBwdInterp, AtomicDqMatchesPerSequenceGradients) {
  const VarlenCase& c = GetParam();
  check_varlen_bwd_case(c, varlen_bwd_case_configs(c, true));
}

INSTANTIATE_TEST_SUITE_P(varlen, Fa2VarlenBwdInterp, ::testing::ValuesIn(varlen_cases()),
                         [](const auto& info) { return info.param.name; });

// One sequence packed is the dense problem in bshd layout: the packed backward computes it with the same
// operations, so the gradients agree exactly.
TEST(Fa2VarlenBwdKernel, OneSequenceEqualsTheDenseBackwardExactly) {
  for (int causal = 0; causal < 3; ++causal) {
    VarlenProblem v;
    v.seqlens_q = {70};
    v.seqlens_k = {90};
    v.H = 4, v.H_KV = 2, v.D = 32, v.causal = causal;
    AttentionProblem d = v.shape();
    d.bshd_layout = true;
    const AttentionInputs in = make_varlen_inputs(v, 21 + static_cast<uint64_t>(causal), 1.0);
    const HostBuffer dout = make_varlen_dout(v, 5, 1.0);
    AttentionBwdConfigs dense = default_bwd_configs(d);
    dense.dkdv.set("BLOCK_N", 32).set("BLOCK_M", 16);
    dense.dq.set("BLOCK_M", 32).set("BLOCK_N", 16);
    AttentionBwdBuffers a = make_bwd_buffers(d, in, dout);
    run_bwd(d, dense, a);
    AttentionBwdBuffers b = make_varlen_bwd_buffers(v, in, dout);
    run_varlen_bwd(v,
                   {varlen_config_of(fa2_bwd_dkdv_varlen_def(), dense.dkdv),
                    varlen_config_of(fa2_bwd_dq_varlen_def(), dense.dq)},
                   b);
    EXPECT_EQ(a.dq.bytes, b.dq.bytes) << "causal " << causal;
    EXPECT_EQ(a.dk.bytes, b.dk.bytes) << "causal " << causal;
    EXPECT_EQ(a.dv.bytes, b.dv.bytes) << "causal " << causal;
  }
}

TEST(Fa2VarlenBwdKernel, OffsetsOutsideTheTensorsStayInside) {
  VarlenProblem p;
  p.seqlens_q = {20, 30, 10};
  p.seqlens_k = {25, 5, 40};
  p.D = 32, p.H = 2, p.H_KV = 1, p.causal = 2;
  const AttentionInputs in = make_varlen_inputs(p, 5, 1.0);
  const HostBuffer dout = make_varlen_dout(p, 6, 1.0);
  const VarlenOffsets bad[] = {
      {{0, 20, 10, 1000}, {0, 25, 30, 70}, 64, 64},
      {{-50, 20, 50, 60}, {0, 25, 1 << 30, 70}, 64, 64},
      {{0, 60, 60, 60}, {0, 70, 70, 70}, 32, 32},
  };
  for (bool atomic : {false, true}) { // the dQ kernel; atomic dQ in dK/dV (through a block pointer)
    AttentionBwdConfigs configs = default_varlen_bwd_configs(p, atomic);
    configs.dkdv.set("BLOCK_N", 16).set("BLOCK_M", 16);
    configs.dq.set("BLOCK_M", 16).set("BLOCK_N", 16);
    configs.dkdv.num_warps = 1;
    for (const VarlenOffsets& o : bad) {
      AttentionBwdBuffers b = make_varlen_bwd_buffers(p, in, dout);
      EXPECT_NO_THROW(run_varlen_bwd(p, configs, b, o)) << (atomic ? "atomic dQ" : "dQ kernel");
    }
  }
}

TEST(Fa2VarlenBwdKernel, DefsAreTheDenseKernelsWithVarlen) {
  for (const KernelDef* d : {&fa2_bwd_preprocess_varlen_def(), &fa2_bwd_dkdv_varlen_def(),
                             &fa2_bwd_dq_varlen_def(), &fa2_bwd_dq_convert_varlen_def()}) {
    const Config c = d->default_config();
    EXPECT_EQ(c.get("VARLEN"), 1) << d->name;
    const Kernel k = d->build(c);
    EXPECT_EQ(k.name, d->name);
  }
  // The dK/dV grid: key tiles of the longest key sequence by sequences times kv heads.
  VarlenProblem p;
  p.seqlens_q = {3, 200};
  p.seqlens_k = {130, 0};
  p.H = 4, p.H_KV = 2;
  const AttentionBwdConfigs c = default_varlen_bwd_configs(p);
  EXPECT_EQ(fa2_bwd_dkdv_varlen_def().grid(c.dkdv, varlen_size_args(p)), (Grid{3, 4, 1})); // cdiv(130, 64)
}

} // namespace
