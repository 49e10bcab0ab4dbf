// The attention host API on a GPU: kiln::attention::forward and fa1_forward over device buffers the test
// owns, described as TensorRefs (bhsd, bshd, views into packed QKV), held to the double-precision reference
// with outputs poisoned (NaN) first so that every element is checked as written. Skips without a driver.
//
// The config comes from the autotuner as KILN_AUTOTUNE says (the caller's setting; scripts/gpu_check.sh
// leaves it at its default, so a first run tunes each shape bucket and later runs read the cache).
#include "gpu/attention_gpu_support.h"
#include "gpu/gpu_skip.h"
#include "kernels/attention/attention_api.h"
#include "kernels/compare.h"
#include "runtime/cuda_driver.h"
#include "runtime/device.h"
#include "scoped_env.h"

#include <gtest/gtest.h>

#include <cstdlib>

using namespace kiln;
using namespace kiln::attention;
using namespace kiln::testing_support;

namespace {

enum class Variant { Fa2, Fa1 };

struct RunSpec {
  Variant variant = Variant::Fa2;
  bool with_lse = true;
  void* stream = nullptr;
  std::optional<Config> config;
};

// Runs the API on device copies of seeded random inputs and checks O (and LSE) against the reference.
void check_against_reference(const AttentionProblem& p, uint64_t seed, const RunSpec& spec = {}) {
  SCOPED_TRACE(p.str());
  const AttentionInputs in = make_inputs(p, seed, 2.0);
  AttentionOutputs out = make_outputs(p); // NaN-poisoned
  rt::DeviceBuffer q = upload(in.q), k = upload(in.k), v = upload(in.v), o = upload(out.o),
                   lse = upload(out.lse);
  const AttentionStrides s = attention_strides(p);
  std::optional<TensorRef> lse_ref;
  if (spec.with_lse)
    lse_ref = TensorRef::contiguous(lse.ptr(), DType::f32, {p.B, p.H, p.N_Q});
  AttentionOptions opts = attention_options_for(p);
  opts.stream = spec.stream;
  opts.config = spec.config;
  const TensorRef tq = describe(p, q.ptr(), p.H, p.N_Q, s.q), tk = describe(p, k.ptr(), p.H_KV, p.N_K, s.k),
                  tv = describe(p, v.ptr(), p.H_KV, p.N_K, s.v), to = describe(p, o.ptr(), p.H, p.N_Q, s.o);
  if (spec.variant == Variant::Fa2)
    forward(tq, tk, tv, to, lse_ref, opts);
  else
    fa1_forward(tq, tk, tv, to, lse_ref, opts);
  rt::Stream::wrap(spec.stream).synchronize();

  o.copy_to_host(out.o.bytes.data(), out.o.bytes.size());
  lse.copy_to_host(out.lse.bytes.data(), out.lse.bytes.size());
  const AttentionResult got = gather_outputs(p, out), ref = reference(p, in);
  const double tol = tolerance(p.dtype, p.tf32);
  Comparison co = compare_to_reference(got.o, ref.o);
  EXPECT_TRUE(co.ok(tol)) << "O " << co.str();
  if (spec.with_lse) {
    Comparison cl = compare_to_reference(got.lse, ref.lse);
    EXPECT_TRUE(cl.ok(tol)) << "LSE " << cl.str();
  } else {
    // Not asked for: the caller's LSE buffer is left as it was.
    for (int64_t i = 0; i < out.lse.numel(); ++i)
      ASSERT_TRUE(std::isnan(out.lse.get(i)))
          << "LSE element " << i << " was written without being asked for";
  }
}

TEST(GpuAttentionApi, GroupedQueryBhsd) {
  KILN_REQUIRE_GPU();
  check_against_reference(problem(2, 8, 2, 200, 333, 64, DType::f16, 0, false), 101);
}

TEST(GpuAttentionApi, BshdCausalTopLeft) {
  KILN_REQUIRE_GPU();
  check_against_reference(problem(1, 4, 4, 130, 130, 128, DType::bf16, 1, true), 202);
}

TEST(GpuAttentionApi, CausalBottomRightDecodeLikeWithoutLse) {
  KILN_REQUIRE_GPU();
  AttentionProblem p = problem(2, 6, 3, 77, 300, 96, DType::f16, 2, false); // D pads to a 128-wide tile
  p.k_transposed = false;
  p.sm_scale = 0.07;
  check_against_reference(p, 303, RunSpec{Variant::Fa2, /*with_lse=*/false, nullptr, std::nullopt});
}

TEST(GpuAttentionApi, BottomRightRowsWithoutKeysGiveZeroAndMinusInfinity) {
  // N_Q > N_K with bottom-right causality: the first N_Q - N_K query rows see no key.
  KILN_REQUIRE_GPU();
  check_against_reference(problem(1, 2, 1, 150, 100, 32, DType::f32, 2, true), 404);
}

TEST(GpuAttentionApi, WideF32HeadsRunWithTheDefaultAndWithTuning) {
  // f32 at D > 128 (HEAD_DIM = 256): 4-byte tiles fit only the space's small configs; the default is one of
  // them, and tuning keeps at least one.
  KILN_REQUIRE_GPU();
  {
    ScopedEnv off("KILN_AUTOTUNE", "off");
    for (int64_t d : {160, 192, 224, 256}) {
      SCOPED_TRACE("D " + std::to_string(d) + ", autotune off");
      check_against_reference(problem(1, 2, 1, 100, 130, d, DType::f32, static_cast<int>(d % 3), d % 64 == 0),
                              500 + static_cast<uint64_t>(d));
    }
  }
  ScopedEnv on("KILN_AUTOTUNE", "force");
  SCOPED_TRACE("D 192, autotune force");
  check_against_reference(problem(1, 2, 2, 64, 64, 192, DType::f32, 1, false), 692);
}

TEST(GpuAttentionApi, ExplicitConfig) {
  KILN_REQUIRE_GPU();
  AttentionProblem p = problem(1, 4, 2, 100, 180, 64, DType::f16, 1, false);
  Config c = default_fa2_config(p);
  c.set("BLOCK_M", 64).set("BLOCK_N", 32);
  c.num_warps = 4;
  check_against_reference(p, 505, RunSpec{Variant::Fa2, true, nullptr, c});
}

TEST(GpuAttentionApi, UserStreamAsOpaqueHandle) {
  KILN_REQUIRE_GPU();
  rt::current_device();
  rt::Stream stream = rt::Stream::create(); // a non-blocking stream, as a framework's would be
  void* handle = stream.handle();
  check_against_reference(problem(2, 4, 4, 256, 256, 64, DType::f16, 0, true), 606,
                          RunSpec{Variant::Fa2, true, handle, std::nullopt});
  check_against_reference(problem(1, 4, 1, 64, 96, 64, DType::bf16, 2, false), 607,
                          RunSpec{Variant::Fa2, false, handle, std::nullopt});
}

TEST(GpuAttentionApi, Fa1Forward) {
  KILN_REQUIRE_GPU();
  check_against_reference(problem(2, 4, 2, 100, 130, 64, DType::f16, 0, false), 707,
                          RunSpec{Variant::Fa1, true, nullptr, std::nullopt});
  check_against_reference(problem(1, 2, 2, 90, 60, 128, DType::bf16, 2, true), 708,
                          RunSpec{Variant::Fa1, false, nullptr, std::nullopt});
}

TEST(GpuAttentionApi, ViewsIntoPackedQkv) {
  // One [B, N, 3, H, D] buffer holds q, k and v interleaved per token, as a fused projection writes them.
  KILN_REQUIRE_GPU();
  const AttentionProblem p = problem(2, 4, 4, 96, 96, 64, DType::f16, 1, true);
  const AttentionInputs in = make_inputs(p, 808, 2.0);
  const int64_t row = p.H * p.D; // elements of one of q/k/v per token
  HostBuffer packed(p.dtype, p.B * p.N_Q * 3 * row, "qkv");
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t n = 0; n < p.N_Q; ++n)
      for (int64_t which = 0; which < 3; ++which) {
        const HostBuffer& src = which == 0 ? in.q : which == 1 ? in.k : in.v;
        for (int64_t e = 0; e < row; ++e)
          packed.set(((b * p.N_Q + n) * 3 + which) * row + e, src.get((b * p.N_Q + n) * row + e));
      }
  AttentionOutputs out = make_outputs(p);
  rt::DeviceBuffer qkv = upload(packed), o = upload(out.o), lse = upload(out.lse);
  const int64_t elem = dtype_bytes(p.dtype);
  auto view = [&](int64_t which) {
    return TensorRef{qkv.ptr() + static_cast<uint64_t>(which * row * elem),
                     p.dtype,
                     {p.B, p.N_Q, p.H, p.D},
                     {p.N_Q * 3 * row, 3 * row, p.D, 1}};
  };
  forward(view(0), view(1), view(2), TensorRef::contiguous(o.ptr(), p.dtype, {p.B, p.N_Q, p.H, p.D}),
          TensorRef::contiguous(lse.ptr(), DType::f32, {p.B, p.H, p.N_Q}), attention_options_for(p));
  rt::Stream().synchronize();
  o.copy_to_host(out.o.bytes.data(), out.o.bytes.size());
  lse.copy_to_host(out.lse.bytes.data(), out.lse.bytes.size());
  const AttentionResult got = gather_outputs(p, out), ref = reference(p, in);
  Comparison co = compare_to_reference(got.o, ref.o), cl = compare_to_reference(got.lse, ref.lse);
  EXPECT_TRUE(co.ok(tolerance(p.dtype))) << "O " << co.str();
  EXPECT_TRUE(cl.ok(tolerance(p.dtype))) << "LSE " << cl.str();
}

} // namespace
