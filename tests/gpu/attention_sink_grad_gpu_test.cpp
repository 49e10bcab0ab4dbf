// The gradient of attention-sink logits on a GPU: the kernel (fa2_bwd_sink.h) on the interpreter's cases
// (attention_sink_grad_cases.h), and the backward API's options.dsink after a forward through the API, per
// head and per row, against the double-precision closed form. Skips without a driver.
#include "gpu/attention_gpu_support.h"
#include "gpu/gpu_skip.h"
#include "interp/attention_sink_grad_cases.h"
#include "kernels/attention/attention_bwd_api.h"
#include "runtime/device.h"

#include <gtest/gtest.h>

#include <cstdlib>

using namespace kiln;
using namespace kiln::attention;
using namespace kiln::testing_support;

namespace {

class GpuSinkGrad : public ::testing::TestWithParam<ModCase> {
protected:
  static void SetUpTestSuite() { setenv("KILN_AUTOTUNE", "off", /*overwrite=*/0); }
};

TEST_P(GpuSinkGrad, PerRowAndPerHeadMatchTheClosedForm) {
  KILN_REQUIRE_GPU();
  check_sink_grad_case(GetParam(), Executor::Gpu);
}

INSTANTIATE_TEST_SUITE_P(sink_grad, GpuSinkGrad, ::testing::ValuesIn(sink_grad_cases()),
                         [](const auto& info) { return info.param.name; });

// forward() then backward() with options.dsink of `shape` ([H] or [B, H, N_Q]), poisoned first; returns the
// gradient it wrote.
std::vector<double> api_sink_grad(const AttentionProblem& p, const ModCase& c, const AttentionInputs& in,
                                  const HostBuffer& dout, bool per_head) {
  BackwardOptions options;
  static_cast<AttentionOptions&>(options) = attention_options_for(p);
  options.mods = c.mods;
  std::vector<rt::DeviceBuffer> held;
  for (const auto& [name, t] : c.tensors) {
    held.push_back(upload(t.data));
    options.mod_tensors[name] = TensorRef{held.back().ptr(),
                                          t.data.dtype,
                                          {t.shape.begin(), t.shape.end()},
                                          {t.strides.begin(), t.strides.end()}};
  }
  const int64_t rows = p.B * p.H * p.N_Q, n = per_head ? p.H : rows;
  HostBuffer poisoned_q(p.dtype, q_numel(p)), poisoned_kv(p.dtype, kv_numel(p)), poisoned_sink(DType::f32, n);
  poison(poisoned_q);
  poison(poisoned_kv);
  poison(poisoned_sink);
  rt::DeviceBuffer q = upload(in.q), k = upload(in.k), v = upload(in.v), d_out = upload(dout),
                   o(in.q.bytes.size()), lse(static_cast<size_t>(rows) * sizeof(float)),
                   dq = upload(poisoned_q), dk = upload(poisoned_kv), dv = upload(poisoned_kv),
                   dsink = upload(poisoned_sink);
  const AttentionStrides s = attention_strides(p);
  const TensorRef tq = describe(p, q.ptr(), p.H, p.N_Q, s.q), tk = describe(p, k.ptr(), p.H_KV, p.N_K, s.k),
                  tv = describe(p, v.ptr(), p.H_KV, p.N_K, s.v), to = describe(p, o.ptr(), p.H, p.N_Q, s.o);
  const TensorRef tlse = TensorRef::contiguous(lse.ptr(), DType::f32, {p.B, p.H, p.N_Q});
  forward(tq, tk, tv, to, tlse, options);
  options.dsink = per_head ? TensorRef::contiguous(dsink.ptr(), DType::f32, {p.H})
                           : TensorRef::contiguous(dsink.ptr(), DType::f32, {p.B, p.H, p.N_Q});
  backward(tq, tk, tv, to, tlse, describe(p, d_out.ptr(), p.H, p.N_Q, s.q),
           describe(p, dq.ptr(), p.H, p.N_Q, s.q), describe(p, dk.ptr(), p.H_KV, p.N_K, s.k),
           describe(p, dv.ptr(), p.H_KV, p.N_K, s.k), options);
  const HostBuffer got = download(dsink, DType::f32, n);
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    out[static_cast<size_t>(i)] = got.get(i);
  return out;
}

TEST(GpuSinkGradApi, BackwardWritesTheSinkGradientPerHeadAndPerRow) {
  KILN_REQUIRE_GPU();
  setenv("KILN_AUTOTUNE", "off", /*overwrite=*/0);
  for (const ModCase& c : sink_grad_cases()) {
    SCOPED_TRACE(c.name);
    const AttentionProblem& p = c.base.problem;
    const AttentionInputs in = make_inputs(p, 71, c.base.input_scale);
    const HostBuffer dout = make_dout(p, 72, 1.0);
    const std::vector<double> ref = reference_sink_gradient(p, in, dout, c.mods, c.tensors);
    const std::vector<double> magnitude = sink_grad_magnitude(p, in, dout, c);
    // The forward's O and LSE are the GPU's here, not the reference's: the forward's tolerance adds to it.
    const double lse = max_abs_lse(reference_with_mods(p, in, c.mods, c.tensors));
    const double tol =
        attention_grad_tolerance(p.dtype, p.tf32, lse) + attention_tolerance(p.dtype, p.tf32, lse);
    const Comparison rows = compare_to_reference(api_sink_grad(p, c, in, dout, false), ref, magnitude);
    EXPECT_TRUE(rows.ok(tol)) << "per row: " << rows.str() << ", tolerance " << tol;
    const Comparison heads = compare_to_reference(api_sink_grad(p, c, in, dout, true), per_head_sums(p, ref),
                                                  per_head_sums(p, magnitude));
    EXPECT_TRUE(heads.ok(tol)) << "per head: " << heads.str() << ", tolerance " << tol;
  }
}

} // namespace
