// The differential suite on the GPU: 520 random attention problems (attention_random_cases.h) through the public
// API (kiln::attention::forward) with random padded strides in both layouts, outputs poisoned first, each held
// to the double-precision reference, and every eighth also to the interpreter running the same config. The
// problems are drawn from a pool of 24 kernel variants (dtype, HEAD_DIM, EVEN_D, causal mode, K variant), so the
// run compiles a few dozen kernels, not hundreds; each variant runs its default config (the tuner's choices are
// covered by the autotune suite). Skips without a driver.
#include "gpu/attention_gpu_support.h"
#include "gpu/gpu_skip.h"
#include "gpu/differential_gpu_support.h"
#include "interp/attention_random_cases.h"
#include "kernels/attention/attention_api.h"
#include "kernels/attention/attention_tolerance.h"
#include "kernels/compare.h"
#include "runtime/device.h"

#include <gtest/gtest.h>

#include <cstdio>

using namespace kiln;
using namespace kiln::attention;
using namespace kiln::testing_support;

namespace {

constexpr uint64_t kSuiteSeed = 5050;
constexpr int kProblems = 520;
constexpr int kVariants = 24;
constexpr int kInterpreterEvery = 8;

TEST(GpuAttentionDifferential, RandomProblemsMatchTheReferenceAndTheInterpreter) {
  KILN_REQUIRE_GPU();
  std::mt19937_64 rng(kSuiteSeed);
  const RandomAttentionLimits lim = gpu_differential_limits();
  std::vector<AttentionVariant> pool;
  for (int i = 0; i < kVariants; ++i)
    pool.push_back(random_attention_variant(rng, lim));

  int interpreted = 0, failures = 0;
  double worst = 0; // the largest error / tolerance seen
  for (int index = 0; index < kProblems; ++index) {
    const AttentionVariant& variant = pool[static_cast<size_t>(draw(rng, 0, kVariants - 1))];
    const AttentionCase c = random_attention_case(rng, variant, lim);
    const AttentionProblem& p = c.problem;
    const std::string name = "problem " + std::to_string(index) + " " + attention_case_name(c) + " (" +
                             variant_name(variant) + ", " + p.str() + ", sm_scale " + std::to_string(p.sm_scale) +
                             ")";
    SCOPED_TRACE(name);
    const AttentionInputs in = make_inputs(p, random_case_input_seed(kSuiteSeed, index), c.input_scale);
    const AttentionStrides packed = attention_strides(p);
    const PaddedTensor sq = padded_strides(rng, p, p.H, p.N_Q), sk = padded_strides(rng, p, p.H_KV, p.N_K),
                       sv = padded_strides(rng, p, p.H_KV, p.N_K), so = padded_strides(rng, p, p.H, p.N_Q);
    const HostBuffer q = repack(in.q, packed.q, sq, p.B, p.H, p.N_Q, p.D),
                     k = repack(in.k, packed.k, sk, p.B, p.H_KV, p.N_K, p.D),
                     v = repack(in.v, packed.v, sv, p.B, p.H_KV, p.N_K, p.D);
    HostBuffer o(p.dtype, so.numel, "O"), lse(DType::f32, p.B * p.H * p.N_Q, "LSE");
    poison(o);
    poison(lse);
    rt::DeviceBuffer dq = upload(q), dk = upload(k), dv = upload(v), d_o = upload(o), d_lse = upload(lse);

    AttentionOptions opts = attention_options_for(p);
    const Config config = default_fa2_config(p);
    opts.config = config;
    try {
      forward(describe(p, dq.ptr(), p.H, p.N_Q, sq.strides), describe(p, dk.ptr(), p.H_KV, p.N_K, sk.strides),
              describe(p, dv.ptr(), p.H_KV, p.N_K, sv.strides), describe(p, d_o.ptr(), p.H, p.N_Q, so.strides),
              TensorRef::contiguous(d_lse.ptr(), DType::f32, {p.B, p.H, p.N_Q}), opts);
      rt::Stream().synchronize();
    } catch (const std::exception& e) {
      ADD_FAILURE() << "forward threw: " << e.what();
      ++failures;
      continue;
    }
    d_o.copy_to_host(o.bytes.data(), o.bytes.size());
    d_lse.copy_to_host(lse.bytes.data(), lse.bytes.size());
    AttentionResult got;
    got.o = logical_tensor(o, so.strides, p.B, p.H, p.N_Q, p.D);
    got.lse = to_doubles(lse);

    const AttentionResult ref = reference(p, in);
    const double tol = attention_tolerance(p.dtype, p.tf32, max_abs_lse(ref));
    auto check = [&](const AttentionResult& want, const char* against) {
      const Comparison co = compare_to_reference(got.o, want.o), cl = compare_to_reference(got.lse, want.lse);
      worst = std::max({worst, co.relative_error / tol, cl.relative_error / tol});
      const bool ok = co.ok(tol) && cl.ok(tol);
      EXPECT_TRUE(ok) << "against " << against << ": O " << co.str() << ", LSE " << cl.str() << ", tolerance "
                      << tol;
      failures += ok ? 0 : 1;
    };
    check(ref, "the double reference");
    if (index % kInterpreterEvery == 0) {
      check(run_fa2_interpreted(p, config, in), "the interpreter");
      ++interpreted;
    }
  }
  std::printf("[ differential ] %d problems over %d kernel variants, %d also against the interpreter: %d "
              "mismatches, largest error %.2f of its tolerance\n",
              kProblems, kVariants, interpreted, failures, worst);
}

} // namespace
