// Attention mods over packed variable-length batches (attention_varlen_mods.h), shared by the interpreter
// (attention_varlen_mods_test.cpp) and GPU (gpu/attention_varlen_mods_gpu_test.cpp) tests: every library mod
// and combinations on packed batches with lengths from 0 to 300, N_Q != N_K per sequence, sequences with no
// keys or no rows, GQA; each mod tensor sized by the padded batch (B sequences, MAX_SEQLEN_Q, MAX_SEQLEN_K).
// The checks: the forward's O and LSE, and the backward's dQ, dK, dV, against the double-precision reference
// that applies the same mods to each sequence (b the sequence, positions within it).
#pragma once

#include "interp/attention_mods_cases.h"
#include "interp/attention_varlen_bwd_cases.h"
#include "kernels/attention/attention_varlen_mods.h"

#include <array>
#include <tuple>

namespace kiln::testing_support {

struct VarlenModCase {
  std::string name;
  VarlenCase base;
  AttentionMods mods;
  ModTensorValues tensors;
};

inline void PrintTo(const VarlenModCase& c, std::ostream* os) { *os << c.name; }

inline VarlenModCase varlen_mod_case(std::string name, VarlenCase base, std::vector<ScoreMod> score,
                                     std::vector<MaskMod> mask, ModTensorValues tensors = {}) {
  VarlenModCase c{std::move(name), std::move(base), {}, std::move(tensors)};
  c.mods.score = std::move(score);
  c.mods.mask = std::move(mask);
  return c;
}

// Document ids "q_doc" [B, MAX_SEQLEN_Q] and "kv_doc" [B, MAX_SEQLEN_K] of a packed batch: each sequence's
// positions cut into documents of `lengths` (cycled; sequence b starting b * 7 tokens into the cycle), the
// same cut for its queries and keys (self-attention within each sequence).
inline ModTensorValues varlen_document_ids(const VarlenProblem& p, const std::vector<int64_t>& lengths) {
  AttentionProblem shape = p.shape();
  ModTensorData q = document_ids(shape, p.max_seqlen_q(), lengths, "q_doc");
  ModTensorData kv = document_ids(shape, p.max_seqlen_k(), lengths, "kv_doc");
  return {{"q_doc", q}, {"kv_doc", kv}};
}

inline std::vector<VarlenModCase> varlen_mod_cases() {
  using D = DType;
  // Ragged self-attention lengths (empty sequences at the ends and inside, one of 300, one of 1) and
  // N_Q != N_K per sequence (a query sequence with no keys, keys with no queries, one longer each way).
  const std::vector<int64_t> ragged = {0, 1, 17, 300, 5, 0, 64, 33};
  const std::vector<int64_t> q = {3, 0, 40, 130, 1, 77, 90};
  const std::vector<int64_t> k = {50, 12, 0, 70, 150, 77, 33};
  std::vector<VarlenModCase> cs;
  cs.push_back(varlen_mod_case("causal_tl_ragged", varlen_case("", ragged, ragged, 32, 0, D::f16, 2, 1), {},
                               {causal_mask(false)}));
  cs.push_back(varlen_mod_case("causal_br_nq_ne_nk_gqa", varlen_case("", q, k, 32, 0, D::f16, 4, 2), {},
                               {causal_mask(true)}));
  cs.push_back(varlen_mod_case("window_7_5_nq_ne_nk", varlen_case("", q, k, 32, 0, D::bf16, 2, 1), {},
                               {sliding_window(7, 5)}));
  cs.push_back(varlen_mod_case("prefix_lm_24_ragged", varlen_case("", ragged, ragged, 32, 0, D::f16), {},
                               {prefix_lm(24)}));
  {
    VarlenCase base = varlen_case("", ragged, ragged, 32, 0, D::f16, 2, 1);
    cs.push_back(varlen_mod_case("document_ragged", base, {}, {document_mask()},
                                 varlen_document_ids(base.problem, {30, 1, 45, 9})));
  }
  {
    VarlenCase base = varlen_case("", q, k, 64, 0, D::f16, 4, 2);
    cs.push_back(varlen_mod_case("alibi_nq_ne_nk_gqa", base, {alibi()}, {},
                                 {{"alibi_slopes", alibi_slopes(base.problem.shape())}}));
  }
  {
    VarlenCase base = varlen_case("", {64, 0, 100, 9}, {100, 7, 64, 0}, 32, 0, D::f16);
    base.input_scale = 3.0; // scores up to ~200
    cs.push_back(varlen_mod_case("softcap_5_x3", base, {softcap(5)}, {}));
  }
  {
    VarlenCase base = varlen_case("", {33, 0, 20}, {70, 5, 1}, 32, 0, D::f32, 2, 1);
    const AttentionProblem s = base.problem.shape(); // B sequences of the longest lengths
    cs.push_back(varlen_mod_case("bias_full_f32", base, {additive_bias()}, {},
                                 {{"bias", bias_tensor(D::f32, {s.B, s.H, s.N_Q, s.N_K}, 11)}}));
    cs.push_back(varlen_mod_case("bias_broadcast_bh_transposed_f16", base, {additive_bias(D::f16)}, {},
                                 {{"bias", bias_tensor(D::f16, {1, 1, s.N_Q, s.N_K}, 12, true)}}));
  }
  {
    // The combination of the issue: documents, a causal sliding window and softcapping, GQA, on each
    // sequence; with padded token strides.
    VarlenCase base = varlen_case("", {100, 0, 37, 1, 150}, {100, 0, 37, 1, 150}, 64, 0, D::bf16, 4, 2);
    base.problem.token_pad = 8;
    base.input_scale = 2.0;
    cs.push_back(varlen_mod_case("document_window_softcap_gqa", base, {softcap(20)},
                                 {document_mask(), sliding_window(16, 0)},
                                 varlen_document_ids(base.problem, {37, 5, 50})));
  }
  {
    // Score mods on the built-in bottom-right causal path (per sequence), with its two stages.
    VarlenCase base = varlen_case("", q, k, 32, 2, D::f16, 2, 1);
    cs.push_back(varlen_mod_case("alibi_builtin_causal_br", base, {alibi()}, {},
                                 {{"alibi_slopes", alibi_slopes(base.problem.shape())}}));
  }
  {
    // Sinks: on the built-in bottom-right causal path with sequences without keys and rows that see no key
    // (O = 0, LSE = the sink; -inf: no sink), and with a window and softcapping.
    const double inf = std::numeric_limits<double>::infinity();
    VarlenCase br = varlen_case("", q, k, 64, 2, D::f16, 4, 2);
    VarlenModCase sinks =
        varlen_mod_case("sinks_causal_br_gqa", br, {}, {},
                        {{"sinks", sink_logits(br.problem.shape(), {-1.0, 0.5, 2.0, -inf})}});
    sinks.mods.sink = {attention_sinks()};
    cs.push_back(sinks);
    VarlenCase w = varlen_case("", ragged, ragged, 32, 0, D::bf16, 2, 1);
    VarlenModCase combo =
        varlen_mod_case("sinks_window_softcap_ragged", w, {softcap(10)}, {sliding_window(20, 3)},
                        {{"sinks", sink_logits(w.problem.shape(), {1.5, 3.0})}});
    combo.mods.sink = {attention_sinks()};
    cs.push_back(combo);
  }
  for (VarlenModCase& c : cs)
    c.base.name = c.name;
  return cs;
}

inline uint64_t varlen_mod_case_seed(const VarlenModCase& c) { return varlen_case_seed(c.base) + 0x30d; }

// The forward's result `out` (on make_varlen_inputs(p, varlen_mod_case_seed(c), input scale)) against the
// per-sequence reference with the same mods.
inline void check_varlen_mod_case_result(const VarlenModCase& c, const AttentionResult& out) {
  const VarlenProblem& p = c.base.problem;
  const AttentionInputs in = make_varlen_inputs(p, varlen_mod_case_seed(c), c.base.input_scale);
  const AttentionResult ref = varlen_reference_with_mods(p, in, c.mods, c.tensors);
  // The mods change the result (else the case would check nothing about them).
  EXPECT_FALSE(compare_to_reference(varlen_reference(p, in).o, ref.o).ok(1e-2))
      << c.name << ": the mods change nothing";
  ASSERT_EQ(out.o.size(), ref.o.size());
  ASSERT_EQ(out.lse.size(), ref.lse.size());
  const double tol = attention_tolerance(p.dtype, p.tf32, max_abs_lse(ref));
  const Comparison o = compare_to_reference(out.o, ref.o);
  EXPECT_TRUE(o.ok(tol)) << c.name << " O: " << o.str() << ", tolerance " << tol << " (" << p.str() << ")";
  const Comparison lse = compare_to_reference(out.lse, ref.lse);
  EXPECT_TRUE(lse.ok(tol)) << c.name << " LSE: " << lse.str() << ", tolerance " << tol << " (" << p.str()
                           << ")";
  // Rows that see no key and no sink: exactly O = 0 and LSE = −inf (LSE [H, total_q], O [total_q, H, D]).
  const int64_t total_q = p.total_q();
  for (int64_t h = 0; h < p.H; ++h)
    for (int64_t t = 0; t < total_q; ++t) {
      if (ref.lse[static_cast<size_t>(h * total_q + t)] != -std::numeric_limits<double>::infinity())
        continue;
      ASSERT_EQ(out.lse[static_cast<size_t>(h * total_q + t)], -std::numeric_limits<double>::infinity())
          << c.name << " token " << t << " head " << h << " sees no key";
      for (int64_t d = 0; d < p.D; ++d)
        ASSERT_EQ(out.o[static_cast<size_t>((t * p.H + h) * p.D + d)], 0.0)
            << c.name << " token " << t << " head " << h << " sees no key, O[" << d << "]";
    }
}

// The forward with the case's mods on `config` (varlen_case_config(c.base): the case's tiles).
inline void check_varlen_mod_case(const VarlenModCase& c, const Config& config,
                                  Executor executor = Executor::Interpreter) {
  const VarlenProblem& p = c.base.problem;
  const AttentionInputs in = make_varlen_inputs(p, varlen_mod_case_seed(c), c.base.input_scale);
  check_varlen_mod_case_result(c, run_fa2_varlen_with_mods(p, c.mods, c.tensors, config, in, executor));
}

// The whole packed backward with the mods against the per-sequence gradients with the same mods; gradients
// with no term in the reference (a row that sees no key, a key no row sees) exactly 0.
// On `configs` (varlen_bwd_case_configs(c.base, atomic_dq): the case's tiles).
inline void check_varlen_mod_bwd_case(const VarlenModCase& c, const AttentionBwdConfigs& configs,
                                      Executor executor = Executor::Interpreter) {
  const VarlenProblem& p = c.base.problem;
  const uint64_t seed = varlen_mod_case_seed(c) + 0xb4c4;
  const AttentionInputs in = make_varlen_inputs(p, seed, c.base.input_scale);
  const HostBuffer dout = make_varlen_dout(p, seed + 1, 1.0);
  const AttentionGrads ref = varlen_reference_backward_with_mods(p, in, dout, c.mods, c.tensors);
  const AttentionGrads plain = varlen_reference_backward(p, in, dout);
  EXPECT_FALSE(compare_to_reference(plain.dq, ref.dq).ok(1e-2) &&
               compare_to_reference(plain.dk, ref.dk).ok(1e-2))
      << c.name << ": the mods change no gradient";
  const AttentionGrads out = run_varlen_bwd_with_mods(p, c.mods, c.tensors, configs, in, dout, executor);
  ASSERT_EQ(out.dq.size(), ref.dq.size());
  ASSERT_EQ(out.dk.size(), ref.dk.size());
  const double tol = attention_grad_tolerance(
      p.dtype, p.tf32, max_abs_lse(varlen_reference_with_mods(p, in, c.mods, c.tensors)));
  const std::array<GradComparison, 3> comparisons = compare_grads(out, ref);
  for (auto [name, got, magnitude, cmp] :
       {std::tuple{"dQ", &out.dq, &ref.dq_magnitude, comparisons[0].result},
        {"dK", &out.dk, &ref.dk_magnitude, comparisons[1].result},
        {"dV", &out.dv, &ref.dv_magnitude, comparisons[2].result}}) {
    EXPECT_TRUE(cmp.ok(tol)) << c.name << " " << name << ": " << cmp.str() << ", tolerance " << tol << " ("
                             << p.str() << ")";
    int64_t nonzero = 0, first = -1;
    for (size_t i = 0; i < got->size(); ++i)
      if ((*magnitude)[i] == 0.0 && (*got)[i] != 0.0 && nonzero++ == 0)
        first = static_cast<int64_t>(i);
    EXPECT_EQ(nonzero, 0) << c.name << " " << name << ": " << nonzero
                          << " elements with no term should be exactly 0, the first at " << first;
  }
}

} // namespace kiln::testing_support
