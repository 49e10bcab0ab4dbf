// Attention mods (attention_mods.h) on a GPU: the interpreter's cases (interp/attention_mods_cases.h) run
// through the JIT at the cases' small tiles and at the default config, and through the host API
// (attention::forward with options.mods and device mod tensors) on larger shapes, each against the
// double-precision reference with the same mods. Skips without a driver.
#include "gpu/attention_gpu_support.h"
#include "gpu/gpu_skip.h"
#include "interp/attention_mods_cases.h"
#include "codegen/codegen.h"
#include "kernels/attention/fa2_fwd.h"
#include "runtime/device.h"

#include <gtest/gtest.h>

using namespace kiln;
using namespace kiln::testing_support;

namespace {

class GpuMods : public ::testing::TestWithParam<ModCase> {};

TEST_P(GpuMods, MatchesTheReferenceAtTheCaseTilesAndTheDefaultConfig) {
  KILN_REQUIRE_GPU();
  const ModCase& c = GetParam();
  check_mod_case(c, mod_case_config(c), Executor::Gpu);
  SCOPED_TRACE("default config");
  check_mod_case(c, default_fa2_config(c.base.problem), Executor::Gpu);
}

INSTANTIATE_TEST_SUITE_P(mods, GpuMods, ::testing::ValuesIn(mod_cases()),
                         [](const auto& info) { return info.param.name; });

// The two-stage late tiles with a full and an empty mbarrier per tile of a ring slot (TILE_BARRIERS=1), which FA2's
// space with mods offers: 128 x 64, and 128 x 128 on a static persistent grid, warp-specialised, K handed back after
// S's wait and V after P V an iteration later, the mods' masks and scores applied between. Warp specialisation needs
// f16 or bf16 on sm_90a, so the f32 cases are left out.
class GpuModsTileBarriers : public ::testing::TestWithParam<ModCase> {};

TEST_P(GpuModsTileBarriers, MatchesTheReferenceOnTheLateTileWithTileBarriers) {
  KILN_REQUIRE_GPU();
  KILN_REQUIRE_SM90("warp specialisation");
  const ModCase& c = GetParam();
  Config config = default_fa2_config(c.base.problem);
  config.set("BLOCK_M", 128).set("BLOCK_N", 64).set("WARP_SPECIALIZE", 1).set("LAST_PRODUCT_LATE", 1);
  config.set("TILE_BARRIERS", 1).set("LAZY_RESCALE", 1);
  config.num_warps = 8;
  config.num_stages = 2;
  for (int persistent : {0, 1}) { // the space offers the 128 x 128 form on a static persistent grid too
    config.set("PERSISTENT", persistent);
    if (persistent)
      config.set("BLOCK_N", 128);
    SCOPED_TRACE(config.str());
    const GeneratedKernel g =
        generate_cuda(build_fa2_fwd_with_mods(config, c.mods), Target::parse(rt::current_device().arch));
    ASSERT_EQ(g.why_not_warp_specialized, "");
    ASSERT_EQ(g.why_not_late_product, "");
    ASSERT_EQ(g.why_not_tile_barriers, "");
    ASSERT_EQ(g.why_not_persistent, "");
    check_mod_case(c, config, Executor::Gpu);
  }
}

std::vector<ModCase> half_precision_mod_cases() {
  std::vector<ModCase> cs;
  for (const ModCase& c : mod_cases())
    if (c.base.problem.dtype != DType::f32)
      cs.push_back(c);
  return cs;
}

INSTANTIATE_TEST_SUITE_P(mods, GpuModsTileBarriers, ::testing::ValuesIn(half_precision_mod_cases()),
                         [](const auto& info) { return info.param.name; });

// forward() with mods over device buffers: the tuner's (or default) config, the mods' tensors as TensorRefs.
void check_api(const AttentionProblem& p, const AttentionMods& mods, const ModTensorValues& tensors) {
  SCOPED_TRACE(p.str() + " mods " + mods.name());
  const AttentionInputs in = make_inputs(p, 77, 2.0);
  AttentionOutputs out = make_outputs(p);
  rt::DeviceBuffer q = upload(in.q), k = upload(in.k), v = upload(in.v), o = upload(out.o),
                   lse = upload(out.lse);
  std::vector<rt::DeviceBuffer> held;
  attention::AttentionOptions opts = attention_options_for(p);
  opts.mods = mods;
  for (const auto& [name, t] : tensors) {
    held.push_back(upload(t.data));
    opts.mod_tensors[name] = attention::TensorRef{held.back().ptr(),
                                                  t.data.dtype,
                                                  {t.shape.begin(), t.shape.end()},
                                                  {t.strides.begin(), t.strides.end()}};
  }
  const AttentionStrides s = attention_strides(p);
  attention::forward(describe(p, q.ptr(), p.H, p.N_Q, s.q), describe(p, k.ptr(), p.H_KV, p.N_K, s.k),
                     describe(p, v.ptr(), p.H_KV, p.N_K, s.v), describe(p, o.ptr(), p.H, p.N_Q, s.o),
                     attention::TensorRef::contiguous(lse.ptr(), DType::f32, {p.B, p.H, p.N_Q}), opts);
  rt::Stream().synchronize();
  o.copy_to_host(out.o.bytes.data(), out.o.bytes.size());
  lse.copy_to_host(out.lse.bytes.data(), out.lse.bytes.size());
  const AttentionResult got = gather_outputs(p, out), ref = reference_with_mods(p, in, mods, tensors);
  const double tol = attention_tolerance(p.dtype, p.tf32, max_abs_lse(ref));
  Comparison co = compare_to_reference(got.o, ref.o), cl = compare_to_reference(got.lse, ref.lse);
  EXPECT_TRUE(co.ok(tol)) << "O " << co.str();
  EXPECT_TRUE(cl.ok(tol)) << "LSE " << cl.str();
}

TEST(GpuModsApi, DocumentWindowSoftcapThroughForward) {
  KILN_REQUIRE_GPU();
  AttentionProblem p = problem(2, 8, 2, 700, 700, 128, DType::bf16, 0, false);
  ModTensorData ids = document_ids(p, 700, {300, 17, 250, 90}, "q_doc");
  ModTensorData kv = ids;
  AttentionMods mods;
  mods.mask = {document_mask(), sliding_window(128, 0)};
  mods.score = {softcap(30)};
  check_api(p, mods, {{"q_doc", ids}, {"kv_doc", kv}});
}

TEST(GpuModsApi, AlibiAndBiasThroughForward) {
  KILN_REQUIRE_GPU();
  AttentionProblem p = problem(1, 4, 4, 333, 515, 64, DType::f16, 2, true);
  AttentionMods alibi_mods;
  alibi_mods.score = {alibi()};
  check_api(p, alibi_mods, {{"alibi_slopes", alibi_slopes(p)}});
  AttentionMods bias_mods;
  bias_mods.score = {additive_bias(DType::f16)};
  check_api(p, bias_mods, {{"bias", bias_tensor(DType::f16, {1, p.H, p.N_Q, p.N_K}, 5)}});
}

} // namespace
