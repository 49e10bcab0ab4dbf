// The attention backward over packed variable-length sequences on a GPU: the interpreter's varlen cases
// through the JIT at the default configs (deterministic and atomic dQ), and through the host API
// (forward_varlen then backward_varlen, or backward_varlen_with_workspace on a workspace of
// varlen_backward_workspace_bytes, on device buffers: default configs, the tuner (with deterministic = false
// the faster of the two pairs), an explicit atomic config,
// batches without rows or without keys), each against the per-sequence analytic gradients with outputs
// poisoned first. Skips without a driver. GpuVarlenBwd.* runs the kernels, GpuVarlenBwdApi.* the host
// API.
#include "gpu/attention_gpu_support.h"
#include "gpu/gpu_skip.h"
#include "interp/attention_varlen_bwd_cases.h"
#include "kernels/attention/attention_varlen_bwd_api.h"
#include "kernels/attention/attention_varlen_defs.h"
#include "kernels/attention/fa2_bwd_varlen.h"
#include "runtime/device.h"
#include "scoped_env.h"

#include <gtest/gtest.h>

using namespace kiln;
using namespace kiln::attention;
using namespace kiln::testing_support;

namespace {

class GpuVarlenBwd : public ::testing::TestWithParam<VarlenCase> {};

TEST_P(GpuVarlenBwd, KernelsMatchPerSequenceGradients) {
  KILN_REQUIRE_GPU();
  const VarlenCase& c = GetParam();
  check_varlen_bwd_case(c, default_varlen_bwd_configs(c.problem, false), Executor::Gpu);
  SCOPED_TRACE("atomic dQ");
  check_varlen_bwd_case(c, default_varlen_bwd_configs(c.problem, true), Executor::Gpu);
}

INSTANTIATE_TEST_SUITE_P(varlen, GpuVarlenBwd, ::testing::ValuesIn(varlen_cases()),
                         [](const auto& info) { return info.param.name; });

struct ApiSpec {
  bool check_offsets = true;
  std::optional<Config> dkdv_config;
  bool deterministic = true;
  bool workspace = false; // backward_varlen_with_workspace on a buffer of varlen_backward_workspace_bytes
};

rt::DeviceBuffer upload_padded(const HostBuffer& b) {
  rt::DeviceBuffer d(std::max<size_t>(b.bytes.size(), 16)); // an empty tensor still gets an address
  d.copy_from_host(b.bytes.data(), b.bytes.size());
  return d;
}

// forward_varlen, then backward_varlen, on device copies; the gradients against the reference.
void check_api(const VarlenCase& c, const ApiSpec& spec) {
  const VarlenProblem& p = c.problem;
  SCOPED_TRACE(p.str());
  const uint64_t seed = varlen_case_seed(c) + 0xb4c4;
  const AttentionInputs in = make_varlen_inputs(p, seed, c.input_scale);
  const HostBuffer dout = make_varlen_dout(p, seed + 1, 1.0);
  AttentionBwdBuffers host = make_varlen_bwd_buffers(p, in, dout); // gradients poisoned
  rt::DeviceBuffer q = upload_padded(in.q), k = upload_padded(in.k), v = upload_padded(in.v),
                   o = upload_padded(host.o), lse = upload_padded(host.lse), d_out = upload_padded(dout),
                   dq = upload_padded(host.dq), dk = upload_padded(host.dk), dv = upload_padded(host.dv);
  rt::DeviceBuffer cu_q = rt::DeviceBuffer::from_host(p.cu_seqlens_q()),
                   cu_k = rt::DeviceBuffer::from_host(p.cu_seqlens_k());
  const VarlenStrides s = varlen_strides(p);
  auto packed = [&](const rt::DeviceBuffer& b, int64_t total, int64_t heads, const PackedStrides& st) {
    return TensorRef{b.ptr(), p.dtype, {total, heads, p.D}, {st.token, st.head, 1}};
  };
  VarlenBatch batch;
  batch.cu_seqlens_q = TensorRef::contiguous(cu_q.ptr(), DType::i32, {p.batch() + 1});
  batch.cu_seqlens_k = TensorRef::contiguous(cu_k.ptr(), DType::i32, {p.batch() + 1});
  batch.max_seqlen_q = p.max_seqlen_q();
  batch.max_seqlen_k = p.max_seqlen_k();
  batch.check_offsets = spec.check_offsets;
  BackwardOptions opts;
  opts.causal = static_cast<Causal>(p.causal);
  opts.k_transposed = p.k_transposed;
  opts.tf32 = p.tf32;
  opts.exact_masked_v = p.exact_masked_v;
  opts.deterministic = spec.deterministic;
  opts.config = spec.dkdv_config;
  const TensorRef tq = packed(q, p.total_q(), p.H, s.q), tk = packed(k, p.total_k(), p.H_KV, s.k),
                  tv = packed(v, p.total_k(), p.H_KV, s.v), to = packed(o, p.total_q(), p.H, s.o),
                  tlse = TensorRef::contiguous(lse.ptr(), DType::f32, {p.H, p.total_q()});
  // The forward's O and LSE as the kernel writes them (the buffers held the reference's: overwritten here).
  AttentionOptions forward_opts = opts; // the backward's dK/dV config is not a forward config
  forward_opts.config.reset();
  forward_varlen(tq, tk, tv, to, tlse, batch, forward_opts);
  const TensorRef tdout = packed(d_out, p.total_q(), p.H, s.q), tdq = packed(dq, p.total_q(), p.H, s.q),
                  tdk = packed(dk, p.total_k(), p.H_KV, s.k), tdv = packed(dv, p.total_k(), p.H_KV, s.v);
  if (spec.workspace) {
    const uint64_t bytes = varlen_backward_workspace_bytes(tq, opts);
    rt::DeviceBuffer ws(std::max<uint64_t>(bytes, 16));
    backward_varlen_with_workspace(tq, tk, tv, to, tlse, tdout, tdq, tdk, tdv, batch,
                                   BackwardWorkspace{ws.ptr(), bytes}, opts);
    rt::Stream::wrap(nullptr).synchronize(); // the workspace is freed below
  } else {
    backward_varlen(tq, tk, tv, to, tlse, tdout, tdq, tdk, tdv, batch, opts);
  }
  dq.copy_to_host(host.dq.bytes.data(), host.dq.bytes.size());
  dk.copy_to_host(host.dk.bytes.data(), host.dk.bytes.size());
  dv.copy_to_host(host.dv.bytes.data(), host.dv.bytes.size());
  const AttentionGrads got = gather_varlen_grads(p, host), ref = varlen_reference_backward(p, in, dout);
  const double tol = attention_grad_tolerance(p.dtype, p.tf32, max_abs_lse(varlen_reference(p, in)));
  for (const auto& [name, cmp] : compare_grads(got, ref))
    EXPECT_TRUE(cmp.ok(tol)) << name << ": " << cmp.str() << ", tolerance " << tol;
}

class GpuVarlenBwdApi : public ::testing::TestWithParam<VarlenCase> {};

TEST_P(GpuVarlenBwdApi, BackwardVarlenMatchesPerSequenceGradients) {
  KILN_REQUIRE_GPU();
  ScopedEnv off("KILN_AUTOTUNE", "off");
  check_api(GetParam(), ApiSpec{});
  SCOPED_TRACE("offsets not checked on the host");
  check_api(GetParam(), ApiSpec{false, std::nullopt, true});
  SCOPED_TRACE("on the caller's workspace, offsets not checked (as a CUDA-graph capture runs it)");
  check_api(GetParam(), ApiSpec{false, std::nullopt, true, true});
}

INSTANTIATE_TEST_SUITE_P(varlen, GpuVarlenBwdApi, ::testing::ValuesIn(varlen_cases()),
                         [](const auto& info) { return info.param.name; });

TEST(GpuVarlenBwdApi, TunedAndAtomic) {
  KILN_REQUIRE_GPU();
  VarlenCase c = varlen_case("ragged_bf16_d128_causalTL", {0, 1, 300, 129, 64, 0, 255},
                             {7, 1, 280, 300, 64, 3, 0}, 128, 1, DType::bf16, 8, 2);
  {
    ScopedEnv tune("KILN_AUTOTUNE", "force");
    check_api(c, ApiSpec{});
    // deterministic = false and no config: both pairs tuned, the faster run (backward()'s rule).
    SCOPED_TRACE("the faster pair");
    check_api(c, ApiSpec{true, std::nullopt, false});
    SCOPED_TRACE("the faster pair on the caller's workspace, offsets not checked");
    check_api(c, ApiSpec{false, std::nullopt, false, true});
    SCOPED_TRACE("the faster pair without keys (no dK/dV launch in either pair)");
    check_api(varlen_case("no_keys_f16_d64", {5, 70, 0}, {0, 0, 0}, 64, 0, DType::f16, 2, 1),
              ApiSpec{true, std::nullopt, false});
  }
  ScopedEnv off("KILN_AUTOTUNE", "off");
  SCOPED_TRACE("atomic dQ");
  const Config atomic =
      varlen_config_of(fa2_bwd_dkdv_varlen_def(), default_bwd_configs(c.problem.shape(), true).dkdv);
  check_api(c, ApiSpec{true, atomic, false});
  SCOPED_TRACE("atomic dQ on the caller's workspace (Delta, then the accumulator)");
  check_api(c, ApiSpec{true, atomic, false, true});
}

} // namespace

namespace {

// The interpreter's random packed problems (random_varlen_case) through the JIT at the default configs,
// backward.
class GpuVarlenBwdRandom : public ::testing::TestWithParam<int> {};

TEST_P(GpuVarlenBwdRandom, BackwardMatchesTheReference) {
  KILN_REQUIRE_GPU();
  const VarlenCase c = random_varlen_case(GetParam());
  SCOPED_TRACE(c.problem.str());
  check_varlen_bwd_case(c, default_varlen_bwd_configs(c.problem, GetParam() % 2 == 1), Executor::Gpu);
}

INSTANTIATE_TEST_SUITE_P(varlen, GpuVarlenBwdRandom, ::testing::Range(0, 24));

} // namespace
