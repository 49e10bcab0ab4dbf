// The attention backward with mods, shared by the interpreter (attention_mods_bwd_test.cpp) and GPU
// (gpu/attention_bwd_gpu_test.cpp) tests: the mod cases of the forward (attention_mods_cases.h), and the
// check every case runs: dQ, dK, dV of the whole backward with the mods against the double-precision
// gradients with the same mods, gradients that must be exactly zero (rows that see no key, keys no row sees)
// exactly zero.
#pragma once

#include "interp/attention_bwd_test_cases.h"
#include "interp/attention_mods_cases.h"
#include "kernels/attention/attention_block_mask_host.h"

#include <tuple>

namespace kiln::testing_support {

// The case's tiles as the backward's (interp_bwd_configs), for the interpreter or the GPU.
inline AttentionBwdConfigs mod_case_bwd_configs(const ModCase& c, bool atomic_dq = false) {
  return interp_bwd_configs(c.base, atomic_dq);
}

// The forward's mod cases, and cases whose score mods bend the scores far from the identity (large scores
// under a tight softcap), so that a wrong or missing d score_mod / d score shows in every gradient it
// reaches.
inline std::vector<ModCase> mod_bwd_cases() {
  std::vector<ModCase> cs = mod_cases();
  {
    // The combination of the issue: documents, a causal sliding window and a tight softcap; GQA, B = 2,
    // tails.
    AttentionCase base = make_case(70, 70, 32, 0, DType::f16, 4, 2, true, false, 3.0);
    base.problem.B = 2;
    ModTensorData ids = document_ids(base.problem, 70, {23, 4, 40}, "q_doc");
    ModTensorData kv = ids;
    kv.data.name = "kv_doc";
    cs.push_back(mod_case("bwd_document_window_softcap_tight", base, {softcap(2)},
                          {document_mask(), sliding_window(12, 0)}, {{"q_doc", ids}, {"kv_doc", kv}}));
  }
  {
    // Two score mods in a chain (the derivative is the product) on the built-in causal path, f32.
    AttentionCase base = make_case(45, 60, 32, 1, DType::f32, 2, 1, false, false, 3.0);
    cs.push_back(mod_case("bwd_alibi_then_softcap_causal_tl_f32", base, {alibi(), softcap(3)}, {},
                          {{"alibi_slopes", alibi_slopes(base.problem)}}));
  }
  {
    // A sink with a tight softcap and a bias, bf16.
    AttentionCase base = make_case(50, 40, 32, 0, DType::bf16, 2, 2, false, false, 3.0);
    const AttentionProblem& p = base.problem;
    ModCase c = mod_case("bwd_sinks_bias_softcap", base, {additive_bias(), softcap(4)}, {},
                         {{"bias", bias_tensor(DType::f32, {1, p.H, p.N_Q, p.N_K}, 13)},
                          {"sinks", sink_logits(p, {2.0, -1.0})}});
    c.mods.sink = {attention_sinks()};
    cs.push_back(c);
  }
  return cs;
}

// With `block_mask`, the backward over it (run_bwd_with_block_mask) instead of the mods' key ranges.
inline AttentionGrads check_mod_bwd_case(const ModCase& c, const AttentionBwdConfigs& configs,
                                         Executor executor = Executor::Interpreter,
                                         const HostBlockMask* block_mask = nullptr) {
  const AttentionProblem& p = c.base.problem;
  const uint64_t seed = bwd_case_seed(p) + 0x3d;
  AttentionInputs in = make_inputs(p, seed, c.base.input_scale);
  HostBuffer dout = make_dout(p, seed + 1, 1.0);
  AttentionGrads ref = reference_backward_with_mods(p, in, dout, c.mods, c.tensors);
  // The mods change the gradients (else the case would check nothing about them).
  const AttentionGrads plain = reference_backward(p, logical_bwd_tensors(p, in, dout));
  EXPECT_FALSE(compare_to_reference(plain.dq, ref.dq).ok(1e-2) &&
               compare_to_reference(plain.dk, ref.dk).ok(1e-2))
      << c.name << ": the mods change no gradient";
  AttentionGrads out =
      block_mask ? run_bwd_with_block_mask(p, c.mods, c.tensors, *block_mask, configs, in, dout, executor)
                 : run_bwd_with_mods(p, c.mods, c.tensors, configs, in, dout, executor);
  const double tol =
      grad_tolerance(p.dtype, p.tf32, max_abs_lse(reference_with_mods(p, in, c.mods, c.tensors)));
  const std::array<GradComparison, 3> comparisons = compare_grads(out, ref);
  for (auto [name, got, magnitude, cmp] :
       {std::tuple{"dQ", &out.dq, &ref.dq_magnitude, comparisons[0].result},
        {"dK", &out.dk, &ref.dk_magnitude, comparisons[1].result},
        {"dV", &out.dv, &ref.dv_magnitude, comparisons[2].result}}) {
    EXPECT_TRUE(cmp.ok(tol)) << c.name << " " << name << ": " << cmp.str() << ", tolerance " << tol << " ("
                             << p.str() << ")";
    // No term at all in the reference (a row that sees no key, a key no row sees): exactly 0, never NaN.
    int64_t nonzero = 0, first = -1;
    for (size_t i = 0; i < got->size(); ++i)
      if ((*magnitude)[i] == 0.0 && (*got)[i] != 0.0 && nonzero++ == 0)
        first = static_cast<int64_t>(i);
    EXPECT_EQ(nonzero, 0) << c.name << " " << name << ": " << nonzero
                          << " elements with no term should be exactly 0, the first at " << first;
  }
  return out;
}

} // namespace kiln::testing_support
