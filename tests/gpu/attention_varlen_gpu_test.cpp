// Packed variable-length attention (fa2_fwd_varlen, attention::forward_varlen) on a GPU: the interpreter's
// cases (interp/attention_varlen_cases.h, lengths 0..300, N_Q != N_K per sequence, causal both ways, GQA,
// padded strides, the dtypes) through the JIT at GPU-sized tiles, at the default config and through the host
// API (offsets checked on the host or not, with and without LSE, the tuner's config, a user stream), each
// against the double-precision per-sequence reference with outputs poisoned (NaN) first, so that every
// element is checked as written; and the random packed problems (GpuVarlenRandom). Skips without a driver.
// scripts/gpu_check.sh --varlen runs these suites and a memcheck pass over a ragged case.
#include "gpu/attention_gpu_support.h"
#include "gpu/gpu_skip.h"
#include "interp/attention_varlen_cases.h"
#include "kernels/attention/attention_varlen_api.h"
#include "kernels/attention/fa2_fwd_varlen.h"
#include "runtime/device.h"
#include "scoped_env.h"

#include <gtest/gtest.h>

using namespace kiln;
using namespace kiln::attention;
using namespace kiln::testing_support;

namespace {

AttentionResult run_varlen(const VarlenProblem& p, const Config& c, const AttentionInputs& in, Executor e) {
  return run_fa2_varlen_interpreted(p, c, in, e);
}

class GpuVarlen : public ::testing::TestWithParam<VarlenCase> {};

// The kernel through the JIT: at tiles of at least 64 x 32 (the GPU's smallest sensible ones), then at the
// problem's default config, with MASK_EVERY_TILE=1 as well.
TEST_P(GpuVarlen, KernelMatchesPerSequenceReference) {
  KILN_REQUIRE_GPU();
  const VarlenCase& c = GetParam();
  Config config = varlen_case_config(c);
  config.set("BLOCK_M", std::max<int64_t>(c.block_m, 64)).set("BLOCK_N", std::max<int64_t>(c.block_n, 32));
  check_varlen_case(c, run_varlen, config, Executor::Gpu);
  SCOPED_TRACE("default config");
  check_varlen_case(c, run_varlen, default_fa2_varlen_config(c.problem), Executor::Gpu);
  SCOPED_TRACE("MASK_EVERY_TILE=1");
  config.set("MASK_EVERY_TILE", 1);
  check_varlen_case(c, run_varlen, config, Executor::Gpu);
}

INSTANTIATE_TEST_SUITE_P(varlen, GpuVarlen, ::testing::ValuesIn(varlen_cases()),
                         [](const auto& info) { return info.param.name; });

struct ApiSpec {
  bool with_lse = true;
  bool check_offsets = true;
  void* stream = nullptr;
  std::optional<Config> config;
  int64_t extra_max_seqlen = 0; // max_seqlen_q/k passed this much above the longest sequence
};

// forward_varlen on device copies of the case's inputs and offsets.
void check_api(const VarlenCase& c, const ApiSpec& spec) {
  const VarlenProblem& p = c.problem;
  SCOPED_TRACE(p.str());
  const AttentionInputs in = make_varlen_inputs(p, varlen_case_seed(c), c.input_scale);
  AttentionOutputs out = make_varlen_outputs(p); // NaN-poisoned
  auto bytes_of = [](const HostBuffer& b) {
    return std::max<size_t>(b.bytes.size(), 16);
  }; // no 0-byte buffers
  rt::DeviceBuffer q(bytes_of(in.q)), k(bytes_of(in.k)), v(bytes_of(in.v)), o(bytes_of(out.o)),
      lse(bytes_of(out.lse));
  q.copy_from_host(in.q.bytes.data(), in.q.bytes.size());
  k.copy_from_host(in.k.bytes.data(), in.k.bytes.size());
  v.copy_from_host(in.v.bytes.data(), in.v.bytes.size());
  o.copy_from_host(out.o.bytes.data(), out.o.bytes.size());
  lse.copy_from_host(out.lse.bytes.data(), out.lse.bytes.size());
  rt::DeviceBuffer cu_q = rt::DeviceBuffer::from_host(p.cu_seqlens_q()),
                   cu_k = rt::DeviceBuffer::from_host(p.cu_seqlens_k());

  const VarlenStrides s = varlen_strides(p);
  auto packed = [&](const rt::DeviceBuffer& b, int64_t total, int64_t heads, const PackedStrides& st) {
    return TensorRef{b.ptr(), p.dtype, {total, heads, p.D}, {st.token, st.head, 1}};
  };
  VarlenBatch batch;
  batch.cu_seqlens_q = TensorRef::contiguous(cu_q.ptr(), DType::i32, {p.batch() + 1});
  batch.cu_seqlens_k = TensorRef::contiguous(cu_k.ptr(), DType::i32, {p.batch() + 1});
  batch.max_seqlen_q = p.max_seqlen_q() + spec.extra_max_seqlen;
  batch.max_seqlen_k = p.max_seqlen_k() + spec.extra_max_seqlen;
  batch.check_offsets = spec.check_offsets;
  AttentionOptions opts;
  opts.causal = static_cast<Causal>(p.causal);
  opts.sm_scale = p.sm_scale;
  opts.k_transposed = p.k_transposed;
  opts.tf32 = p.tf32;
  opts.exact_masked_v = p.exact_masked_v;
  opts.stream = spec.stream;
  opts.config = spec.config;
  std::optional<TensorRef> lse_ref;
  if (spec.with_lse)
    lse_ref = TensorRef::contiguous(lse.ptr(), DType::f32, {p.H, p.total_q()});
  forward_varlen(packed(q, p.total_q(), p.H, s.q), packed(k, p.total_k(), p.H_KV, s.k),
                 packed(v, p.total_k(), p.H_KV, s.v), packed(o, p.total_q(), p.H, s.o), lse_ref, batch, opts);
  rt::Stream::wrap(spec.stream).synchronize();
  o.copy_to_host(out.o.bytes.data(), out.o.bytes.size());
  lse.copy_to_host(out.lse.bytes.data(), out.lse.bytes.size());

  const AttentionResult got = gather_varlen_outputs(p, out), ref = varlen_reference(p, in);
  const double tol = attention_tolerance(p.dtype, p.tf32, max_abs_lse(ref));
  const Comparison co = compare_to_reference(got.o, ref.o);
  EXPECT_TRUE(co.ok(tol)) << "O " << co.str();
  if (spec.with_lse) {
    const Comparison cl = compare_to_reference(got.lse, ref.lse);
    EXPECT_TRUE(cl.ok(tol)) << "LSE " << cl.str();
  } else {
    for (int64_t i = 0; i < out.lse.numel(); ++i)
      ASSERT_TRUE(std::isnan(out.lse.get(i)))
          << "LSE element " << i << " was written without being asked for";
  }
}

class GpuVarlenApi : public ::testing::TestWithParam<VarlenCase> {};

// Through forward_varlen at the default config (the tuner is exercised once, below, rather than per case).
TEST_P(GpuVarlenApi, ForwardVarlenMatchesPerSequenceReference) {
  KILN_REQUIRE_GPU();
  ScopedEnv off("KILN_AUTOTUNE", "off");
  check_api(GetParam(), ApiSpec{});
  SCOPED_TRACE("offsets not checked on the host, no LSE");
  check_api(GetParam(), ApiSpec{false, false, nullptr, std::nullopt, 0});
}

INSTANTIATE_TEST_SUITE_P(varlen, GpuVarlenApi, ::testing::ValuesIn(varlen_cases()),
                         [](const auto& info) { return info.param.name; });

TEST(GpuVarlenApi, TunedOnAUserStreamWithMaxSeqlenAboveTheLongest) {
  KILN_REQUIRE_GPU();
  rt::current_device();
  rt::Stream stream = rt::Stream::create();
  ScopedEnv tune("KILN_AUTOTUNE", "force");
  VarlenCase c = varlen_case("ragged_bf16_d128_causalBR", {0, 1, 300, 129, 64, 0, 255},
                             {7, 1, 280, 300, 64, 3, 0}, 128, 2, DType::bf16, 8, 2);
  check_api(c, ApiSpec{true, true, stream.handle(), std::nullopt, 37});
}

TEST(GpuVarlenApi, ExplicitConfigAndLongSequences) {
  KILN_REQUIRE_GPU();
  VarlenCase c = varlen_case("long_f16_d64_causalTL", {1000, 3, 2048, 517}, {1000, 900, 2048, 1}, 64, 1,
                             DType::f16, 4, 4);
  Config config = default_fa2_varlen_config(c.problem);
  config.set("BLOCK_M", 64).set("BLOCK_N", 64);
  check_api(c, ApiSpec{true, false, nullptr, config, 0});
}

TEST(GpuVarlenApi, EmptyBatchesLaunchNothing) {
  KILN_REQUIRE_GPU();
  ScopedEnv off("KILN_AUTOTUNE", "off");
  check_api(varlen_case("no_rows", {0, 0, 0}, {5, 0, 9}, 64, 0), ApiSpec{});
  check_api(varlen_case("no_keys", {4, 0, 70}, {0, 0, 0}, 64, 2), ApiSpec{});
}

TEST(GpuVarlenApi, BadOffsetsOnTheDeviceAreAnError) {
  KILN_REQUIRE_GPU();
  rt::current_device();
  rt::DeviceBuffer q(45 * 4 * 64 * 2), k(37 * 2 * 64 * 2), v(37 * 2 * 64 * 2), o(45 * 4 * 64 * 2);
  rt::DeviceBuffer cu_q = rt::DeviceBuffer::from_host(std::vector<int32_t>{0, 5, 3, 45}),
                   cu_k = rt::DeviceBuffer::from_host(std::vector<int32_t>{0, 7, 37, 37});
  VarlenBatch batch;
  batch.cu_seqlens_q = TensorRef::contiguous(cu_q.ptr(), DType::i32, {4});
  batch.cu_seqlens_k = TensorRef::contiguous(cu_k.ptr(), DType::i32, {4});
  batch.max_seqlen_q = 42, batch.max_seqlen_k = 30;
  try {
    forward_varlen(TensorRef::contiguous(q.ptr(), DType::f16, {45, 4, 64}),
                   TensorRef::contiguous(k.ptr(), DType::f16, {37, 2, 64}),
                   TensorRef::contiguous(v.ptr(), DType::f16, {37, 2, 64}),
                   TensorRef::contiguous(o.ptr(), DType::f16, {45, 4, 64}), std::nullopt, batch);
    FAIL() << "expected an error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("cu_seqlens_q[2] = 3 is below cu_seqlens_q[1] = 5"),
              std::string::npos)
        << e.what();
  }
}

} // namespace

namespace {

// The interpreter's random packed problems (random_varlen_case) through the JIT at GPU tiles, forward.
class GpuVarlenRandom : public ::testing::TestWithParam<int> {};

TEST_P(GpuVarlenRandom, ForwardMatchesTheReference) {
  KILN_REQUIRE_GPU();
  const VarlenCase c = random_varlen_case(GetParam());
  SCOPED_TRACE(c.problem.str());
  Config config = varlen_case_config(c);
  config.set("BLOCK_M", std::max<int64_t>(c.block_m, 64)).set("BLOCK_N", std::max<int64_t>(c.block_n, 32));
  check_varlen_case(c, run_varlen, config, Executor::Gpu);
}

INSTANTIATE_TEST_SUITE_P(varlen, GpuVarlenRandom, ::testing::Range(0, 24));

} // namespace
