// Block masks (attention_block_mask.h) on a GPU: the classifier kernel through the JIT gives the
// interpreter's lists (which the interp tests check against the dense mask) for every block-mask case, and
// the forward over them the reference's results; through the host API, make_block_mask and forward() with
// options.block_mask on larger shapes, built once and reused across calls, against the reference with the
// same mods. Skips without a driver.
#include "gpu/attention_gpu_support.h"
#include "gpu/gpu_skip.h"
#include "interp/attention_block_mask_cases.h"
#include "kernels/attention/attention_block_mask_api.h"
#include "runtime/device.h"

#include <gtest/gtest.h>

#include <optional>

using namespace kiln;
using namespace kiln::testing_support;

namespace {

class GpuBlockMask : public ::testing::TestWithParam<ModCase> {};

TEST_P(GpuBlockMask, ListsAndForwardMatchTheInterpreterAndTheReference) {
  KILN_REQUIRE_GPU();
  const ModCase& c = GetParam();
  const AttentionProblem& p = c.base.problem;
  const HostBlockMask gpu =
      make_host_block_mask(p, c.mods, c.tensors, c.base.block_m, c.base.block_n, Executor::Gpu);
  expect_block_mask_matches_dense_mask(gpu, p, c.mods, c.tensors, c.name);
  const AttentionResult out = run_fa2_with_block_mask(p, c.mods, c.tensors, gpu, mod_case_config(c),
                                                      mod_case_inputs(c), Executor::Gpu);
  check_mod_case_result(c, out);
}

INSTANTIATE_TEST_SUITE_P(block_mask, GpuBlockMask, ::testing::ValuesIn(block_mask_cases()),
                         [](const auto& info) { return info.param.name; });

// The device tensors of a problem's inputs and outputs, and the mods' tensors, for forward().
struct DeviceCall {
  rt::DeviceBuffer q, k, v, o, lse;
  std::vector<rt::DeviceBuffer> held;
  attention::AttentionOptions opts;
};

void upload_mods(DeviceCall& d, const AttentionMods& mods, const ModTensorValues& tensors) {
  d.opts.mods = mods;
  for (const auto& [name, t] : tensors) {
    d.held.push_back(upload(t.data));
    d.opts.mod_tensors[name] = attention::TensorRef{d.held.back().ptr(),
                                                    t.data.dtype,
                                                    {t.shape.begin(), t.shape.end()},
                                                    {t.strides.begin(), t.strides.end()}};
  }
}

AttentionResult run_forward(const AttentionProblem& p, DeviceCall& d, const AttentionInputs& in) {
  AttentionOutputs out = make_outputs(p);
  d.q = upload(in.q), d.k = upload(in.k), d.v = upload(in.v), d.o = upload(out.o), d.lse = upload(out.lse);
  const AttentionStrides s = attention_strides(p);
  attention::forward(describe(p, d.q.ptr(), p.H, p.N_Q, s.q), describe(p, d.k.ptr(), p.H_KV, p.N_K, s.k),
                     describe(p, d.v.ptr(), p.H_KV, p.N_K, s.v), describe(p, d.o.ptr(), p.H, p.N_Q, s.o),
                     attention::TensorRef::contiguous(d.lse.ptr(), DType::f32, {p.B, p.H, p.N_Q}), d.opts);
  rt::Stream().synchronize();
  d.o.copy_to_host(out.o.bytes.data(), out.o.bytes.size());
  d.lse.copy_to_host(out.lse.bytes.data(), out.lse.bytes.size());
  return gather_outputs(p, out);
}

// make_block_mask once, then forward() over it on two inputs (a block mask is reused across calls and
// layers).
void check_api(const AttentionProblem& p, const AttentionMods& mods, const ModTensorValues& tensors,
               int64_t bm, int64_t bn) {
  SCOPED_TRACE(p.str() + " mods " + mods.name());
  DeviceCall d;
  d.opts = attention_options_for(p);
  upload_mods(d, mods, tensors);
  d.opts.block_mask = attention::make_block_mask({p.B, p.H, p.H_KV, p.N_Q, p.N_K}, d.opts, bm, bn);
  rt::Stream().synchronize();
  expect_block_mask_matches_dense_mask(d.opts.block_mask->to_host(), p, mods, tensors, mods.name());
  const HostBlockMask host = d.opts.block_mask->to_host();
  EXPECT_EQ(d.opts.block_mask->runs, lists_are_runs(host)) << "whether every list is one run of tiles";
  // The tuned forward (the configs at the block mask's tiles), then, over lists that are all runs, the
  // warp-specialised kernel of two key ranges (BLOCK_MASK_RUNS=1) on a config given outright: on the usual grid,
  // with late products over tile barriers (on the usual grid and a static persistent one), and on a persistent
  // grid, static and dynamic (its producer reads each program's ranges as it walks them).
  std::vector<std::optional<Config>> configs = {std::nullopt};
  if (d.opts.block_mask->runs) {
    Config ws = attention::block_mask_default_config(*d.opts.block_mask, p);
    ws.set("WARP_SPECIALIZE", 1);
    ws.num_warps = static_cast<int>(bm / 16);
    configs.push_back(ws);
    // The two-stage late tile with a barrier pair per tile of a ring slot (TILE_BARRIERS=1), as the spaces over
    // block masks offer it: K handed back after S's wait, V after P V an iteration later.
    Config late = ws;
    late.set("LAST_PRODUCT_LATE", 1).set("TILE_BARRIERS", 1).set("LAZY_RESCALE", 1);
    late.num_stages = 2;
    configs.push_back(late);
    configs.push_back(late.set("PERSISTENT", 1));
    configs.push_back(ws.set("PERSISTENT", 1));
    configs.push_back(ws.set("PERSISTENT", 2));
  }
  for (const std::optional<Config>& config : configs) {
    d.opts.config = config;
    SCOPED_TRACE(config ? config->str() : std::string("tuned"));
    for (uint64_t seed : {77, 78}) {
      const AttentionInputs in = make_inputs(p, seed, 2.0);
      const AttentionResult got = run_forward(p, d, in), ref = reference_with_mods(p, in, mods, tensors);
      const double tol = attention_tolerance(p.dtype, p.tf32, max_abs_lse(ref));
      Comparison co = compare_to_reference(got.o, ref.o), cl = compare_to_reference(got.lse, ref.lse);
      EXPECT_TRUE(co.ok(tol)) << "O " << co.str();
      EXPECT_TRUE(cl.ok(tol)) << "LSE " << cl.str();
    }
  }
}

TEST(GpuBlockMaskApi, DocumentWindowSoftcapThroughForward) {
  KILN_REQUIRE_GPU();
  AttentionProblem p = problem(2, 8, 2, 700, 700, 128, DType::bf16, 0, false);
  ModTensorData ids = document_ids(p, 700, {300, 17, 250, 90}, "q_doc");
  AttentionMods mods;
  mods.mask = {document_mask(), sliding_window(128, 0)};
  mods.score = {softcap(30)};
  check_api(p, mods, {{"q_doc", ids}, {"kv_doc", ids}}, 128, 64);
}

// Documents whose boundaries fall on the key tiles' edges (multiples of 128) give lists that are all runs:
// the warp-specialised kernel runs with the document ids read by its consumers.
TEST(GpuBlockMaskApi, TileAlignedDocumentsAreRunsAndWarpSpecialised) {
  KILN_REQUIRE_GPU();
  AttentionProblem p = problem(1, 4, 2, 1024, 1024, 128, DType::f16, 1, false); // B 1: document_ids shifts
  ModTensorData ids = document_ids(p, 1024, {256, 128, 512, 128}, "q_doc");  // later batches off the edges
  AttentionMods mods;
  mods.mask = {document_mask()};
  check_api(p, mods, {{"q_doc", ids}, {"kv_doc", ids}}, 128, 64);
}

TEST(GpuBlockMaskApi, CausalAsAModAndTheBuiltInCausalRule) {
  KILN_REQUIRE_GPU();
  AttentionProblem p = problem(1, 4, 4, 333, 515, 64, DType::f16, 0, true);
  AttentionMods causal;
  causal.mask = {causal_mask(true)};
  check_api(p, causal, {}, 64, 64);
  AttentionProblem builtin = p;
  builtin.causal = 2;
  check_api(builtin, AttentionMods{}, {}, 128, 64);
}

} // namespace
