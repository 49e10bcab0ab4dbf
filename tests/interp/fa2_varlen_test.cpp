// FlashAttention-2 forward over packed variable-length sequences (fa2_fwd_varlen) in the interpreter: the
// shared varlen cases against the per-sequence double reference, one sequence bit for bit against the dense
// kernel, offsets the host never checked (the kernel must stay inside the tensors: the interpreter refuses
// any access outside a buffer), and the kernel's structure (the dense kernel's loops, nothing added to them).
#include "attention_varlen_cases.h"

#include "dsl/printer.h"
#include "kernels/attention/fa2_fwd.h"
#include "kernels/attention/fa2_fwd_varlen.h"

using namespace kiln;
using namespace kiln::testing_support;

namespace {

AttentionResult run_varlen(const VarlenProblem& p, const Config& c, const AttentionInputs& in, Executor e) {
  return run_fa2_varlen_interpreted(p, c, in, e);
}

class Fa2VarlenInterp : public ::testing::TestWithParam<VarlenCase> {};

TEST_P(Fa2VarlenInterp, MatchesPerSequenceReference) {
  const VarlenCase& c = GetParam();
  check_varlen_case(c, run_varlen, varlen_case_config(c));
}

INSTANTIATE_TEST_SUITE_P(varlen, Fa2VarlenInterp, ::testing::ValuesIn(varlen_cases()),
                         [](const auto& info) { return info.param.name; });

TEST(Fa2VarlenKernel, MaskingEveryTileAndExactMaskedValuesMatchTheReference) {
  VarlenCase c = varlen_case("mask_every_tile", {40, 0, 77}, {77, 9, 40}, 32, 2, DType::f16, 2, 1);
  Config config = varlen_case_config(c);
  config.set("MASK_EVERY_TILE", 1);
  check_varlen_case(c, run_varlen, config);

  c.problem.exact_masked_v = true;
  c.problem.causal = 1;
  check_varlen_case(c, run_varlen, varlen_case_config(c));
}

// One sequence packed is the dense problem in bshd layout: the varlen kernel computes it with the same
// operations, so the results agree exactly.
TEST(Fa2VarlenKernel, OneSequenceEqualsTheDenseKernelExactly) {
  for (int causal = 0; causal < 3; ++causal) {
    VarlenProblem v;
    v.seqlens_q = {100};
    v.seqlens_k = {130};
    v.H = 4, v.H_KV = 2, v.D = 64, v.causal = causal;
    AttentionProblem d = v.shape();
    d.bshd_layout = true; // [1, N, H, D]: the packed layout of one sequence
    const AttentionInputs in = make_varlen_inputs(v, 11 + static_cast<uint64_t>(causal), 2.0);
    Config dense = default_fa2_config(d);
    dense.set("BLOCK_M", 32).set("BLOCK_N", 16);
    const AttentionResult a = run_fa2_interpreted(d, dense, in);
    const AttentionResult b = run_fa2_varlen_interpreted(v, varlen_config(dense), in);
    // Dense O is gathered [B, H, N, D], packed O [N, H, D]; LSE is [H, N] in both.
    for (int64_t h = 0; h < v.H; ++h)
      for (int64_t i = 0; i < 100; ++i)
        for (int64_t e = 0; e < v.D; ++e)
          ASSERT_EQ(a.o[static_cast<size_t>((h * 100 + i) * v.D + e)],
                    b.o[static_cast<size_t>((i * v.H + h) * v.D + e)])
              << "causal " << causal << " head " << h << " row " << i;
    ASSERT_EQ(a.lse, b.lse) << "causal " << causal;
  }
}

// Offsets the host API did not check (VarlenBatch::check_on_host = false): decreasing, past the tensors'
// ends, negative. The kernel clamps them, so the interpreter (which refuses any access outside a buffer) runs
// it through; sequences the clamped offsets describe are still computed right.
TEST(Fa2VarlenKernel, OffsetsOutsideTheTensorsStayInside) {
  VarlenProblem p;
  p.seqlens_q = {20, 30, 10};
  p.seqlens_k = {25, 5, 40};
  p.D = 32, p.H = 2, p.H_KV = 1, p.causal = 1;
  const AttentionInputs in = make_varlen_inputs(p, 5, 1.0);
  Config config = default_fa2_varlen_config(p);
  config.set("BLOCK_M", 16).set("BLOCK_N", 16);
  const VarlenOffsets bad[] = {
      {{0, 20, 10, 1000}, {0, 25, 30, 70}, 64, 64},      // decreasing q offsets, and one far past total_q
      {{-50, 20, 50, 60}, {0, 25, 1 << 30, 70}, 64, 64}, // negative, and a key offset far past total_k
      {{0, 60, 60, 60}, {0, 70, 70, 70}, 32, 64},        // a sequence longer than max_seqlen_q
  };
  for (const VarlenOffsets& o : bad)
    EXPECT_NO_THROW(run_fa2_varlen_interpreted(p, config, in, o));

  // A good first sequence, then decreasing offsets: the first is computed as in the reference, the others are
  // empty (their clamped spans [20, 20) and [5, 5)) and write nothing.
  VarlenOffsets partly = varlen_offsets(p);
  partly.cu_seqlens_q = {0, 20, 5, 5};
  const AttentionResult out = run_fa2_varlen_interpreted(p, config, in, partly);
  const AttentionResult ref = varlen_reference(p, in);
  const int64_t total_q = p.total_q();
  for (int64_t h = 0; h < p.H; ++h)
    for (int64_t t = 0; t < total_q; ++t) {
      const double got = out.lse[static_cast<size_t>(h * total_q + t)];
      if (t < 20)
        EXPECT_NEAR(got, ref.lse[static_cast<size_t>(h * total_q + t)], 1e-3)
            << "head " << h << " token " << t;
      else
        EXPECT_TRUE(std::isnan(got)) << "head " << h << " token " << t
                                     << " belongs to no sequence: not written";
    }
}

TEST(Fa2VarlenKernel, KeepsTheDenseKernelsLoops) {
  VarlenProblem p;
  p.seqlens_q = p.seqlens_k = {10};
  p.causal = 1;
  const Kernel k = build_fa2_fwd_varlen(default_fa2_varlen_config(p));
  int loops = 0, dots = 0;
  walk(k.body, [&](const Op& op) {
    loops += op.kind == OpKind::For;
    dots += op.kind == OpKind::Dot;
  });
  EXPECT_EQ(loops, 2) << print_kernel(k);
  EXPECT_EQ(dots, 4) << print_kernel(k);
  const std::string ir = print_kernel(k);
  EXPECT_NE(ir.find("CU_SEQLENS_Q"), std::string::npos) << ir;
  EXPECT_NE(ir.find("TOTAL_Q"), std::string::npos) << ir;
}

TEST(Fa2VarlenKernel, GridIsLongestSequenceTilesBySequenceHeads) {
  VarlenProblem p;
  p.seqlens_q = {0, 300, 5};
  p.seqlens_k = {7, 1, 0};
  p.H = 4, p.H_KV = 4;
  const Config c = default_fa2_varlen_config(p); // BLOCK_M = 128
  EXPECT_EQ(fa2_fwd_varlen_def().grid(c, varlen_size_args(p)), (Grid{3, 12, 1}));
}

TEST(Fa2VarlenKernel, DenseConfigIsAnError) {
  VarlenProblem p;
  p.seqlens_q = p.seqlens_k = {10};
  Config dense = default_fa2_config(p.shape());
  dense.set("VARLEN", 0);
  try {
    build_fa2_fwd_varlen(dense);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("expected VARLEN=1"), std::string::npos) << e.what();
  }
}

} // namespace
