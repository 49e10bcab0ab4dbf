// The attention backward's host API on a GPU: kiln::attention::forward then backward over device buffers
// the test owns (bhsd, bshd, GQA, strided views of packed gradients, a user stream), dQ, dK, dV held to the
// double-precision gradients (reference_backward) with the gradients poisoned (NaN) first so that every
// element is checked as written. Skips without a driver.
//
// KILN_AUTOTUNE is set to "off" for this suite unless the caller set it (the default configs through the
// tuner's path), except where a test needs the tuner's times to choose the non-deterministic variant.
#include "gpu/attention_gpu_support.h"
#include "gpu/gpu_skip.h"
#include "interp/attention_bwd_test_cases.h"
#include "interp/attention_mods_cases.h"
#include "kernels/attention/attention_block_mask_api.h"
#include "kernels/attention/attention_bwd_api.h"
#include "runtime/cuda_driver.h"
#include "runtime/device.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

using namespace kiln;
using namespace kiln::attention;
using namespace kiln::testing_support;

namespace {

BackwardOptions options_for(const AttentionProblem& p) {
  BackwardOptions o;
  static_cast<AttentionOptions&>(o) = attention_options_for(p);
  return o;
}

// grad_tolerance for the inputs' largest finite |LSE|.
double tolerance_for(const AttentionProblem& p, const AttentionInputs& in) {
  return grad_tolerance(p.dtype, p.tf32, max_abs_lse(p, in));
}

class GpuAttentionBwdApi : public ::testing::Test {
protected:
  static void SetUpTestSuite() { setenv("KILN_AUTOTUNE", "off", /*overwrite=*/0); }
};

// The forward through the API for O and LSE, then the backward on `options`; returns the gradients in
// logical order and checks them against the reference.
// With `with_workspace`, through backward_with_workspace on a buffer of backward_workspace_bytes() (poisoned
// with NaN bits first: the kernels must not read scratch they did not write), then a synchronize.
// With mods (options.mods), `mod_tensors` are their host tensors: uploaded and passed as options.mod_tensors to
// both passes, and the reference is reference_backward_with_mods. With `block_mask_tiles`, both passes run over
// a block mask made at those tiles (BLOCK_M, BLOCK_N) by make_block_mask from the mods.
AttentionGrads check_backward(const AttentionProblem& p, uint64_t seed, BackwardOptions options,
                              bool with_workspace = false, const ModTensorValues& mod_tensors = {},
                              std::optional<std::pair<int64_t, int64_t>> block_mask_tiles = std::nullopt) {
  SCOPED_TRACE(p.str());
  std::vector<rt::DeviceBuffer> held; // the mods' tensors on the device
  for (const auto& [name, t] : mod_tensors) {
    held.push_back(upload(t.data));
    options.mod_tensors[name] = TensorRef{held.back().ptr(),
                                          t.data.dtype,
                                          {t.shape.begin(), t.shape.end()},
                                          {t.strides.begin(), t.strides.end()}};
  }
  if (block_mask_tiles)
    options.block_mask = make_block_mask({p.B, p.H, p.H_KV, p.N_Q, p.N_K}, options, block_mask_tiles->first,
                                         block_mask_tiles->second);
  const AttentionInputs in = make_inputs(p, seed, 1.0);
  const HostBuffer dout = make_dout(p, seed + 1, 1.0);
  HostBuffer poisoned_q(p.dtype, q_numel(p)), poisoned_kv(p.dtype, kv_numel(p));
  poison(poisoned_q);
  poison(poisoned_kv);
  rt::DeviceBuffer q = upload(in.q), k = upload(in.k), v = upload(in.v), d_out = upload(dout),
                   o(in.q.bytes.size()), lse(static_cast<size_t>(p.B * p.H * p.N_Q) * sizeof(float)),
                   dq = upload(poisoned_q), dk = upload(poisoned_kv), dv = upload(poisoned_kv);
  const AttentionStrides s = attention_strides(p);
  const TensorRef tq = describe(p, q.ptr(), p.H, p.N_Q, s.q), tk = describe(p, k.ptr(), p.H_KV, p.N_K, s.k),
                  tv = describe(p, v.ptr(), p.H_KV, p.N_K, s.v), to = describe(p, o.ptr(), p.H, p.N_Q, s.o);
  const TensorRef tlse = TensorRef::contiguous(lse.ptr(), DType::f32, {p.B, p.H, p.N_Q});
  AttentionOptions fwd = options;
  fwd.config.reset();
  forward(tq, tk, tv, to, tlse, fwd);
  const TensorRef tdout = describe(p, d_out.ptr(), p.H, p.N_Q, s.q), tdq = describe(p, dq.ptr(), p.H, p.N_Q, s.q),
                  tdk = describe(p, dk.ptr(), p.H_KV, p.N_K, s.k), tdv = describe(p, dv.ptr(), p.H_KV, p.N_K, s.k);
  if (with_workspace) {
    const uint64_t bytes = backward_workspace_bytes(tq, options);
    rt::DeviceBuffer ws(std::max<uint64_t>(bytes, 16));
    KILN_CU_CHECK(cuMemsetD8, "poisoning the workspace", ws.ptr(), 0xFF, ws.bytes());
    backward_with_workspace(tq, tk, tv, to, tlse, tdout, tdq, tdk, tdv, BackwardWorkspace{ws.ptr(), bytes}, options);
    rt::Stream::wrap(options.stream).synchronize();
  } else {
    backward(tq, tk, tv, to, tlse, tdout, tdq, tdk, tdv, options);
  }

  AttentionGrads out;
  out.dq = logical_tensor(download(dq, p.dtype, q_numel(p)), s.q, p.B, p.H, p.N_Q, p.D);
  out.dk = logical_tensor(download(dk, p.dtype, kv_numel(p)), s.k, p.B, p.H_KV, p.N_K, p.D);
  out.dv = logical_tensor(download(dv, p.dtype, kv_numel(p)), s.k, p.B, p.H_KV, p.N_K, p.D);
  const AttentionGrads ref = options.mods.empty()
                                 ? reference_backward(p, logical_bwd_tensors(p, in, dout))
                                 : reference_backward_with_mods(p, in, dout, options.mods, mod_tensors);
  const double tol = options.mods.empty()
                         ? tolerance_for(p, in)
                         : grad_tolerance(p.dtype, p.tf32, max_abs_lse(reference_with_mods(p, in, options.mods, mod_tensors)));
  for (const auto& [name, cmp] : compare_grads(out, ref)) {
    EXPECT_TRUE(cmp.ok(tol)) << name << ": " << cmp.str() << ", tolerance " << tol;
  }
  return out;
}

TEST_F(GpuAttentionBwdApi, GroupedQueryBhsd) {
  KILN_REQUIRE_GPU();
  const AttentionProblem p = problem(2, 8, 2, 200, 333, 64, DType::f16, 0, false);
  check_backward(p, 11, options_for(p));
}

TEST_F(GpuAttentionBwdApi, BshdCausalTopLeft) {
  KILN_REQUIRE_GPU();
  const AttentionProblem p = problem(1, 4, 4, 130, 130, 128, DType::bf16, 1, true);
  check_backward(p, 22, options_for(p));
}

TEST_F(GpuAttentionBwdApi, BottomRightGqaBshdWithRowsThatSeeNoKey) {
  KILN_REQUIRE_GPU();
  AttentionProblem p = problem(2, 6, 3, 150, 100, 96, DType::f16, 2, true); // the first 50 rows see no key
  p.sm_scale = 0.07;
  p.k_transposed = false;
  check_backward(p, 33, options_for(p));
}

TEST_F(GpuAttentionBwdApi, ExplicitConfigsOfBothVariants) {
  KILN_REQUIRE_GPU();
  const AttentionProblem p = problem(1, 4, 2, 100, 180, 64, DType::f16, 1, false);
  BackwardOptions o = options_for(p);
  AttentionBwdConfigs c = default_bwd_configs(p);
  c.dkdv.set("BLOCK_M", 32);
  c.dq.set("BLOCK_N", 32);
  o.config = c.dkdv;
  o.dq_config = c.dq;
  check_backward(p, 44, o);
  o.dq_config.reset();
  o.config = default_bwd_configs(p, /*atomic_dq=*/true).dkdv;
  o.deterministic = false;
  check_backward(p, 45, o);
}

TEST_F(GpuAttentionBwdApi, NonDeterministicChoosesByTheTunersTimes) {
  // With the tuner on, both variants are timed and either may run; the gradients are right either way.
  KILN_REQUIRE_GPU();
  const char* before = std::getenv("KILN_AUTOTUNE");
  const std::string saved = before ? before : "";
  setenv("KILN_AUTOTUNE", "on", 1);
  const AttentionProblem p = problem(2, 4, 2, 256, 256, 64, DType::f16, 1, false);
  BackwardOptions o = options_for(p);
  o.deterministic = false;
  check_backward(p, 55, o);
  setenv("KILN_AUTOTUNE", saved.c_str(), 1);
}

TEST_F(GpuAttentionBwdApi, DeterministicIsBitwiseReproducible) {
  KILN_REQUIRE_GPU();
  const AttentionProblem p = problem(1, 8, 2, 300, 400, 64, DType::f16, 0, false);
  const AttentionGrads first = check_backward(p, 66, options_for(p));
  const AttentionGrads second = check_backward(p, 66, options_for(p));
  EXPECT_EQ(first.dq, second.dq);
  EXPECT_EQ(first.dk, second.dk);
  EXPECT_EQ(first.dv, second.dv);
}

// The capturable entry point on the caller's workspace gives the blocking one's gradients bitwise, for the
// deterministic pair and for ATOMIC_DQ=1 (the accumulator after Delta in the workspace; f32 atomics, so held
// to the reference only).
TEST_F(GpuAttentionBwdApi, CallersWorkspaceMatchesTheBlockingCall) {
  KILN_REQUIRE_GPU();
  const AttentionProblem p = problem(1, 4, 2, 200, 260, 64, DType::f16, 1, false);
  const AttentionGrads blocking = check_backward(p, 88, options_for(p));
  const AttentionGrads on_workspace = check_backward(p, 88, options_for(p), /*with_workspace=*/true);
  EXPECT_EQ(blocking.dq, on_workspace.dq);
  EXPECT_EQ(blocking.dk, on_workspace.dk);
  EXPECT_EQ(blocking.dv, on_workspace.dv);
  BackwardOptions atomic = options_for(p);
  atomic.deterministic = false;
  atomic.config = default_bwd_configs(p, /*atomic_dq=*/true).dkdv;
  check_backward(p, 89, atomic, /*with_workspace=*/true);
}

TEST_F(GpuAttentionBwdApi, UserStreamAsOpaqueHandle) {
  KILN_REQUIRE_GPU();
  rt::current_device();
  rt::Stream stream = rt::Stream::create();
  const AttentionProblem p = problem(2, 4, 4, 128, 96, 64, DType::bf16, 2, false);
  BackwardOptions o = options_for(p);
  o.stream = stream.handle();
  check_backward(p, 77, o);
}

// dK and dV interleaved in one [B, N_K, 2, H_KV, D] buffer (as a fused KV projection's gradient is); with
// N_Q == 0 they are zeroed through those strided views.
TEST_F(GpuAttentionBwdApi, PackedKeyValueGradientsAndNoQueries) {
  KILN_REQUIRE_GPU();
  for (int64_t n_q : {int64_t{70}, int64_t{0}}) {
    SCOPED_TRACE("N_Q=" + std::to_string(n_q));
    AttentionProblem p = problem(2, 4, 2, 70, 90, 64, DType::f16, 0, true);
    const AttentionInputs in = make_inputs(p, 88, 1.0);
    const HostBuffer dout = make_dout(p, 89, 1.0);
    const AttentionGrads ref = reference_backward(p, logical_bwd_tensors(p, in, dout));
    const double tol = tolerance_for(p, in);
    const int64_t row = p.H_KV * p.D; // elements of one of dK/dV per key
    HostBuffer packed(p.dtype, p.B * p.N_K * 2 * row);
    poison(packed);
    rt::DeviceBuffer q = upload(in.q), k = upload(in.k), v = upload(in.v), d_out = upload(dout),
                     o(in.q.bytes.size()), dq(in.q.bytes.size()), dkv = upload(packed),
                     lse(static_cast<size_t>(p.B * p.H * p.N_Q) * sizeof(float));
    p.N_Q = n_q; // N_Q == 0: the same buffers, described as holding no query
    const AttentionStrides s = attention_strides(p);
    const TensorRef tq = describe(p, q.ptr(), p.H, p.N_Q, s.q), tk = describe(p, k.ptr(), p.H_KV, p.N_K, s.k),
                    tv = describe(p, v.ptr(), p.H_KV, p.N_K, s.v), to = describe(p, o.ptr(), p.H, p.N_Q, s.o);
    const TensorRef tlse = TensorRef::contiguous(lse.ptr(), DType::f32, {p.B, p.H, p.N_Q});
    const int64_t elem = dtype_bytes(p.dtype);
    auto view = [&](int64_t which) {
      return TensorRef{dkv.ptr() + static_cast<uint64_t>(which * row * elem),
                       p.dtype,
                       {p.B, p.N_K, p.H_KV, p.D},
                       {p.N_K * 2 * row, 2 * row, p.D, 1}};
    };
    forward(tq, tk, tv, to, tlse, options_for(p));
    backward(tq, tk, tv, to, tlse, describe(p, d_out.ptr(), p.H, p.N_Q, s.q),
             describe(p, dq.ptr(), p.H, p.N_Q, s.q), view(0), view(1), options_for(p));
    const HostBuffer back = download(dkv, p.dtype, packed.numel());
    HostBuffer dk(p.dtype, kv_numel(p)), dv(p.dtype, kv_numel(p));
    for (int64_t t = 0; t < p.B * p.N_K; ++t)
      for (int64_t e = 0; e < row; ++e) {
        dk.set(t * row + e, back.get((t * 2 + 0) * row + e));
        dv.set(t * row + e, back.get((t * 2 + 1) * row + e));
      }
    const std::vector<double> got_dk = logical_tensor(dk, s.k, p.B, p.H_KV, p.N_K, p.D),
                              got_dv = logical_tensor(dv, s.k, p.B, p.H_KV, p.N_K, p.D);
    if (n_q == 0) {
      for (size_t i = 0; i < got_dk.size(); ++i)
        ASSERT_TRUE(got_dk[i] == 0 && got_dv[i] == 0) << "element " << i << " was not zeroed";
      continue;
    }
    Comparison ck = compare_to_reference(got_dk, ref.dk, ref.dk_magnitude),
               cv = compare_to_reference(got_dv, ref.dv, ref.dv_magnitude);
    EXPECT_TRUE(ck.ok(tol)) << "dK " << ck.str();
    EXPECT_TRUE(cv.ok(tol)) << "dV " << cv.str();
  }
}

// forward() and backward() with mods over device buffers: the mods' kernels (named after them, tuned apart),
// their tensors as TensorRefs, deterministic and, with deterministic = false, either variant.
TEST_F(GpuAttentionBwdApi, ModsThroughForwardAndBackward) {
  KILN_REQUIRE_GPU();
  AttentionProblem p = make_case(300, 300, 64, 0, bf16, 4, 2).problem;
  p.B = 2;
  ModTensorData ids = document_ids(p, 300, {120, 9, 100, 60}, "q_doc");
  ModTensorData kv = ids;
  kv.data.name = "kv_doc";
  BackwardOptions options = options_for(p);
  options.mods.mask = {document_mask(), sliding_window(64, 0)};
  options.mods.score = {softcap(4)};
  check_backward(p, 91, options, false, {{"q_doc", ids}, {"kv_doc", kv}});
  check_backward(p, 92, options, /*with_workspace=*/true, {{"q_doc", ids}, {"kv_doc", kv}});

  AttentionProblem br = make_case(257, 190, 128, 2, f16, 4, 4).problem;
  BackwardOptions alibi_options = options_for(br);
  alibi_options.mods.score = {alibi()};
  alibi_options.mods.sink = {attention_sinks()};
  alibi_options.deterministic = false;
  check_backward(br, 93, alibi_options, false,
                 {{"alibi_slopes", alibi_slopes(br)}, {"sinks", sink_logits(br, {1.0, -2.0, 0.5, 3.0})}});
}

// forward() and backward() over a block mask made by make_block_mask from the mods: documents with a window
// and a softcap (GQA, B = 2), causal as a mask mod and the built-in causal rule (N_Q != N_K, ragged), ALiBi with
// a window and sinks; the block mask is reused by both passes, and the caller's workspace works with it.
TEST_F(GpuAttentionBwdApi, BlockMaskThroughForwardAndBackward) {
  KILN_REQUIRE_GPU();
  AttentionProblem p = make_case(300, 300, 64, 0, bf16, 4, 2).problem;
  p.B = 2;
  ModTensorData ids = document_ids(p, 300, {120, 9, 100, 60}, "q_doc");
  ModTensorData kv = ids;
  kv.data.name = "kv_doc";
  BackwardOptions options = options_for(p);
  options.mods.mask = {document_mask(), sliding_window(64, 0)};
  options.mods.score = {softcap(4)};
  check_backward(p, 101, options, false, {{"q_doc", ids}, {"kv_doc", kv}}, std::pair<int64_t, int64_t>{128, 64});
  check_backward(p, 102, options, /*with_workspace=*/true, {{"q_doc", ids}, {"kv_doc", kv}},
                 std::pair<int64_t, int64_t>{64, 64});

  AttentionProblem causal = make_case(333, 515, 64, 0, f16, 4, 4).problem;
  BackwardOptions causal_options = options_for(causal);
  causal_options.mods.mask = {causal_mask(true)};
  check_backward(causal, 103, causal_options, false, {}, std::pair<int64_t, int64_t>{64, 64});
  causal.causal = 2;
  check_backward(causal, 104, options_for(causal), false, {}, std::pair<int64_t, int64_t>{128, 64});

  AttentionProblem br = make_case(257, 190, 128, 0, f16, 4, 4).problem;
  BackwardOptions alibi_options = options_for(br);
  alibi_options.mods.score = {alibi()};
  alibi_options.mods.mask = {sliding_window(48, 16)};
  alibi_options.mods.sink = {attention_sinks()};
  alibi_options.deterministic = false; // over a block mask, still the deterministic pair
  check_backward(br, 105, alibi_options, false,
                 {{"alibi_slopes", alibi_slopes(br)}, {"sinks", sink_logits(br, {1.0, -2.0, 0.5, 3.0})}},
                 std::pair<int64_t, int64_t>{64, 32});
}

} // namespace
