// The attention-mod cases the interpreter (attention_mods_test.cpp) and GPU (gpu/attention_mods_gpu_test.cpp)
// tests share: every library mod and combinations, on shapes with ragged tails, N_Q != N_K and GQA, each with
// its tensors; and the check every case runs: O and LSE of the FA2 forward with the mods against the
// double-precision reference with the same mods, rows that see no key exactly O = 0 and LSE = -inf.
#pragma once

#include "interp/attention_test_cases.h"
#include "kernels/attention/attention_mod_library.h"
#include "kernels/attention/attention_mods_host.h"

#include <cmath>
#include <limits>
#include <string>
#include <vector>

namespace kiln::testing_support {

struct ModCase {
  std::string name;
  AttentionCase base; // problem, input scale, tiles
  AttentionMods mods;
  ModTensorValues tensors;
};

inline void PrintTo(const ModCase& c, std::ostream* os) { *os << c.name; }

// ALiBi's usual slopes for the problem's H heads.
inline ModTensorData alibi_slopes(const AttentionProblem& p) {
  ModTensorData t = contiguous_mod_tensor(DType::f32, {p.H}, "alibi_slopes");
  const std::vector<double> slopes = standard_alibi_slopes(p.H);
  for (int64_t h = 0; h < p.H; ++h)
    t.data.set(h, slopes[static_cast<size_t>(h)]);
  return t;
}

// Document ids of `n` tokens per batch: documents of the given lengths in turn (cycled), batch b starting
// `b * 7` tokens into the cycle, so that batches differ.
inline ModTensorData document_ids(const AttentionProblem& p, int64_t n, const std::vector<int64_t>& lengths,
                                  const std::string& name) {
  ModTensorData t = contiguous_mod_tensor(DType::i32, {p.B, n}, name);
  for (int64_t b = 0; b < p.B; ++b) {
    int64_t doc = 0, left = lengths[0];
    for (int64_t skip = 0; skip < b * 7; ++skip)
      if (--left == 0)
        left = lengths[static_cast<size_t>(++doc) % lengths.size()];
    for (int64_t i = 0; i < n; ++i) {
      t.data.set(b * n + i, static_cast<double>(doc));
      if (--left == 0)
        left = lengths[static_cast<size_t>(++doc) % lengths.size()];
    }
  }
  return t;
}

// A bias of `shape` (each dim the problem's B, H, N_Q, N_K or 1), values in [-2, 2] from `seed`; with
// `transposed`, stored with the last two dims swapped in memory (strides not row-major).
inline ModTensorData bias_tensor(DType dtype, std::vector<int64_t> shape, uint64_t seed,
                                 bool transposed = false) {
  ModTensorData t = contiguous_mod_tensor(dtype, shape, "bias");
  if (transposed) { // [.., Q, K] laid out as [.., K, Q]
    t.strides[3] = shape[2];
    t.strides[2] = 1;
  }
  uint64_t x = seed;
  for (int64_t i = 0; i < t.data.numel(); ++i) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    t.data.set(i, static_cast<double>((x >> 33) % 4001) / 1000.0 - 2.0);
  }
  return t;
}

// Sink logits per head: `values` in turn (-inf is no sink).
inline ModTensorData sink_logits(const AttentionProblem& p, const std::vector<double>& values) {
  ModTensorData t = contiguous_mod_tensor(DType::f32, {p.H}, "sinks");
  for (int64_t h = 0; h < p.H; ++h)
    t.data.set(h, values[static_cast<size_t>(h) % values.size()]);
  return t;
}

inline ModCase mod_case(std::string name, AttentionCase base, std::vector<ScoreMod> score,
                        std::vector<MaskMod> mask, ModTensorValues tensors = {}) {
  ModCase c{std::move(name), std::move(base), {}, std::move(tensors)};
  c.mods.score = std::move(score);
  c.mods.mask = std::move(mask);
  return c;
}

inline std::vector<ModCase> mod_cases() {
  using D = DType;
  std::vector<ModCase> cs;
  // Causal as a mask mod, both alignments, on square, short-query and short-key shapes (rows with no key).
  cs.push_back(mod_case("causal_tl_100x100", make_case(100, 100, 64, 0, D::f16), {}, {causal_mask(false)}));
  cs.push_back(
      mod_case("causal_tl_17x100_gqa", make_case(17, 100, 32, 0, D::f16, 4, 2), {}, {causal_mask(false)}));
  cs.push_back(
      mod_case("causal_br_17x100", make_case(17, 100, 64, 0, D::bf16, 2, 1), {}, {causal_mask(true)}));
  cs.push_back(mod_case("causal_br_100x17", make_case(100, 17, 64, 0, D::f16), {}, {causal_mask(true)}));
  // Sliding windows: causal (right 0) and two-sided, N_Q != N_K, GQA.
  cs.push_back(
      mod_case("window_20_0_100x100", make_case(100, 100, 64, 0, D::f16), {}, {sliding_window(20, 0)}));
  cs.push_back(
      mod_case("window_7_5_77x130_gqa", make_case(77, 130, 32, 0, D::f16, 4, 2), {}, {sliding_window(7, 5)}));
  cs.push_back(mod_case("prefix_lm_24_100x100", make_case(100, 100, 64, 0, D::bf16), {}, {prefix_lm(24)}));
  {
    AttentionCase base = make_case(100, 100, 64, 0, D::f16, 2, 1);
    base.problem.B = 2;
    ModTensorData ids = document_ids(base.problem, 100, {30, 1, 45, 9}, "q_doc");
    ModTensorData kv = ids;
    kv.data.name = "kv_doc";
    cs.push_back(
        mod_case("document_100x100_B2", base, {}, {document_mask()}, {{"q_doc", ids}, {"kv_doc", kv}}));
  }
  {
    // Queries of other documents than the keys: ids 0.. for keys, and some query rows in a document (99) no
    // key has, so that they see nothing.
    AttentionCase base = make_case(40, 130, 32, 0, D::f16, 2, 2);
    ModTensorData q = document_ids(base.problem, 40, {13, 6}, "q_doc");
    q.data.set(5, 99);
    q.data.set(39, 99);
    ModTensorData kv = document_ids(base.problem, 130, {20, 3, 33}, "kv_doc");
    cs.push_back(
        mod_case("document_40x130_no_key_rows", base, {}, {document_mask()}, {{"q_doc", q}, {"kv_doc", kv}}));
  }
  {
    AttentionCase base = make_case(100, 130, 64, 0, D::f16, 4, 2);
    cs.push_back(
        mod_case("alibi_100x130_gqa", base, {alibi()}, {}, {{"alibi_slopes", alibi_slopes(base.problem)}}));
  }
  {
    AttentionCase base = make_case(64, 100, 64, 0, D::f16, 1, 1, false, true, 3.0); // scores up to ~200
    cs.push_back(mod_case("softcap_5_64x100_x3", base, {softcap(5)}, {}));
  }
  {
    AttentionCase base = make_case(33, 70, 32, 0, D::f32, 2, 1);
    base.problem.B = 2;
    const AttentionProblem& p = base.problem;
    cs.push_back(mod_case("bias_full_f32_33x70", base, {additive_bias()}, {},
                          {{"bias", bias_tensor(D::f32, {p.B, p.H, p.N_Q, p.N_K}, 11)}}));
    cs.push_back(mod_case("bias_broadcast_bh_transposed_f16", base, {additive_bias(D::f16)}, {},
                          {{"bias", bias_tensor(D::f16, {1, 1, p.N_Q, p.N_K}, 12, true)}}));
  }
  {
    // The combination: documents, a causal sliding window and softcapping, B = 2, GQA, tails.
    AttentionCase base = make_case(100, 100, 64, 0, D::bf16, 4, 2, true, false, 2.0);
    base.problem.B = 2;
    ModTensorData ids = document_ids(base.problem, 100, {37, 5, 50}, "q_doc");
    ModTensorData kv = ids;
    kv.data.name = "kv_doc";
    cs.push_back(mod_case("document_window_softcap", base, {softcap(20)},
                          {document_mask(), sliding_window(16, 0)}, {{"q_doc", ids}, {"kv_doc", kv}}));
  }
  {
    // Score mods on the built-in causal path (two stages, no mask mod), and with it under a mask mod.
    AttentionCase base = make_case(100, 77, 32, 2, D::f16, 2, 1);
    cs.push_back(mod_case("alibi_builtin_causal_br", base, {alibi()}, {},
                          {{"alibi_slopes", alibi_slopes(base.problem)}}));
    AttentionCase tl = make_case(100, 100, 64, 1, D::f16);
    tl.block_m = 16;
    tl.block_n = 32;
    cs.push_back(mod_case("softcap_window_builtin_causal_tl", tl, {softcap(2)}, {sliding_window(30, 30)}));
  }
  {
    // Attention sinks: on the built-in bottom-right causal path with rows that see no key (O = 0, LSE = the
    // sink; -inf: no sink), and with a window mask and softcapping.
    AttentionCase br = make_case(100, 17, 64, 2, D::f16, 4, 2);
    const double inf = std::numeric_limits<double>::infinity();
    ModCase sinks = mod_case("sinks_causal_br_100x17_gqa", br, {}, {},
                             {{"sinks", sink_logits(br.problem, {-1.0, 0.5, 2.0, -inf})}});
    sinks.mods.sink = {attention_sinks()};
    cs.push_back(sinks);
    AttentionCase w = make_case(77, 130, 32, 0, D::bf16, 2, 1);
    ModCase combo = mod_case("sinks_window_softcap", w, {softcap(10)}, {sliding_window(20, 3)},
                             {{"sinks", sink_logits(w.problem, {1.5, 3.0})}});
    combo.mods.sink = {attention_sinks()};
    cs.push_back(combo);
  }
  return cs;
}

// The inputs every run of a case reads.
inline AttentionInputs mod_case_inputs(const ModCase& c) {
  const AttentionProblem& p = c.base.problem;
  const uint64_t seed = 0x6d0d + static_cast<uint64_t>(p.N_Q * 31 + p.N_K * 7 + p.H);
  return make_inputs(p, seed, c.base.input_scale);
}

// A forward's result `out` for the case (on mod_case_inputs) against the reference with the same mods.
inline void check_mod_case_result(const ModCase& c, const AttentionResult& out) {
  const AttentionProblem& p = c.base.problem;
  AttentionInputs in = mod_case_inputs(c);
  AttentionResult ref = reference_with_mods(p, in, c.mods, c.tensors);
  // The mods change the result (else the case would check nothing about them).
  EXPECT_FALSE(compare_to_reference(reference(p, in).o, ref.o).ok(1e-2))
      << c.name << ": the mods change nothing";
  const double tol = attention_tolerance(p.dtype, p.tf32, max_abs_lse(ref));
  Comparison o = compare_to_reference(out.o, ref.o);
  EXPECT_TRUE(o.ok(tol)) << c.name << " O: " << o.str() << ", tolerance " << tol << " (" << p.str() << ")";
  Comparison lse = compare_to_reference(out.lse, ref.lse);
  EXPECT_TRUE(lse.ok(tol)) << c.name << " LSE: " << lse.str() << ", tolerance " << tol << " (" << p.str()
                           << ")";
  for (size_t row = 0; row < ref.lse.size(); ++row) {
    if (ref.lse[row] != -std::numeric_limits<double>::infinity())
      continue;
    ASSERT_EQ(out.lse[row], -std::numeric_limits<double>::infinity())
        << c.name << " row " << row << " sees no key";
    for (int64_t d = 0; d < p.D; ++d)
      ASSERT_EQ(out.o[row * static_cast<size_t>(p.D) + static_cast<size_t>(d)], 0.0)
          << c.name << " row " << row << " sees no key, O[" << d << "]";
  }
}

// The FA2 forward with the case's mods against the reference with the same mods.
inline void check_mod_case(const ModCase& c, const Config& config,
                           Executor executor = Executor::Interpreter) {
  check_mod_case_result(c, run_fa2_with_mods(c.base.problem, c.mods, c.tensors, config, mod_case_inputs(c),
                                             executor));
}

inline Config mod_case_config(const ModCase& c) {
  Config config = default_fa2_config(c.base.problem);
  config.set("BLOCK_M", c.base.block_m).set("BLOCK_N", c.base.block_n);
  return config;
}

} // namespace kiln::testing_support
