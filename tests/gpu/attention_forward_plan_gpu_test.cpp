// attention::ForwardPlan on a GPU: a plan made on one set of buffers and run on others gives, bitwise, what
// forward() gives on each (same kernel, same config), on the default and a created stream; after the tuner's
// picks move (a forced tuning of the plan's problem) its next run selects again and launches the new pick;
// its address rechecks reject a misaligned or overlapping buffer before launching. Skips without a driver.
#include "gpu/attention_gpu_support.h"
#include "gpu/gpu_skip.h"
#include "kernels/attention/attention_forward_plan.h"
#include "kernels/attention/attention_launch.h"
#include "runtime/cuda_driver.h"
#include "runtime/device.h"
#include "scoped_env.h"
#include "support/error.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <vector>

using namespace kiln;
using namespace kiln::attention;
using namespace kiln::testing_support;

namespace {

// Device copies of seeded random inputs and two pairs of NaN-poisoned outputs: one for forward(), one for
// the plan.
struct Buffers {
  rt::DeviceBuffer q, k, v, o, lse, plan_o, plan_lse;
  TensorRef tq, tk, tv, to, tlse;

  Buffers(const AttentionProblem& p, uint64_t seed)
      : Buffers(p, make_inputs(p, seed, 2.0), make_outputs(p)) {}
  Buffers(const AttentionProblem& p, const AttentionInputs& in, const AttentionOutputs& out)
      : q(upload(in.q)), k(upload(in.k)), v(upload(in.v)), o(upload(out.o)), lse(upload(out.lse)),
        plan_o(upload(out.o)), plan_lse(upload(out.lse)) {
    const AttentionStrides s = attention_strides(p);
    tq = describe(p, q.ptr(), p.H, p.N_Q, s.q);
    tk = describe(p, k.ptr(), p.H_KV, p.N_K, s.k);
    tv = describe(p, v.ptr(), p.H_KV, p.N_K, s.v);
    to = describe(p, o.ptr(), p.H, p.N_Q, s.o);
    tlse = TensorRef::contiguous(lse.ptr(), DType::f32, {p.B, p.H, p.N_Q});
  }
  ForwardAddresses plan_addresses() const {
    return {q.ptr(), k.ptr(), v.ptr(), plan_o.ptr(), plan_lse.ptr()};
  }
};

std::vector<uint8_t> bytes_of(const rt::DeviceBuffer& b) {
  std::vector<uint8_t> h(b.bytes());
  b.copy_to_host(h.data(), h.size());
  return h;
}

// The plan's outputs equal forward()'s bitwise (poisoned first, so every element was written by both).
void expect_same_outputs(const Buffers& b) {
  EXPECT_EQ(bytes_of(b.plan_o), bytes_of(b.o)) << "O of the plan's run differs from forward()'s";
  EXPECT_EQ(bytes_of(b.plan_lse), bytes_of(b.lse)) << "LSE of the plan's run differs from forward()'s";
}

TEST(GpuForwardPlan, RunsOnNewBuffersAsForwardDoes) {
  KILN_REQUIRE_GPU();
  ScopedEnv off("KILN_AUTOTUNE", "off"); // one config for forward() and the plan, whatever was tuned before
  for (bool bshd : {false, true}) {
    const AttentionProblem p = problem(2, 8, 2, 200, 333, 64, DType::f16, 1, bshd);
    SCOPED_TRACE(p.str());
    const AttentionOptions opts = attention_options_for(p);
    std::vector<std::unique_ptr<Buffers>> sets;
    for (uint64_t seed : {11, 22, 33})
      sets.push_back(std::make_unique<Buffers>(p, seed));
    const Buffers& first = *sets[0];
    ForwardPlan plan(first.tq, first.tk, first.tv, first.to, first.tlse, opts);
    EXPECT_FALSE(plan.empty());
    const rt::Stream stream = rt::Stream::create();
    // The last set first, then the one the plan was made on, then the middle one on a stream of its own.
    for (size_t i : {2, 0, 1}) {
      const Buffers& b = *sets[i];
      SCOPED_TRACE("buffers " + std::to_string(i));
      forward(b.tq, b.tk, b.tv, b.to, b.tlse, opts);
      void* on = i == 1 ? static_cast<void*>(stream.handle()) : nullptr;
      plan.run(b.plan_addresses(), on, rt::AutotuneMode::Off);
      rt::Stream::wrap(on).synchronize();
      KILN_CU_CHECK(cuCtxSynchronize, "waiting for the runs");
      expect_same_outputs(b);
    }
  }
}

TEST(GpuForwardPlan, SelectsAgainAfterThePicksMove) {
  KILN_REQUIRE_GPU();
  // A shape of its own, so that the plan starts from whatever cached mode finds and the forced tuning below
  // stores a pick for exactly this problem.
  const AttentionProblem p = problem(1, 3, 1, 176, 208, 64, DType::bf16, 2, false);
  AttentionOptions opts = attention_options_for(p);
  opts.autotune = rt::AutotuneMode::Cached;
  Buffers a(p, 5), b(p, 6);
  ForwardPlan plan(a.tq, a.tk, a.tv, a.to, a.tlse, opts);
  plan.run(a.plan_addresses(), nullptr, rt::AutotuneMode::Cached);

  const uint64_t before = detail::attention_tuner().picks_version();
  const TunedLaunch tuned = tune_forward(a.tq, a.tk, a.tv, a.to, a.tlse, opts, rt::AutotuneMode::Force);
  ASSERT_GT(detail::attention_tuner().picks_version(), before) << "the forced tuning stored no pick";

  plan.run(b.plan_addresses(), nullptr, rt::AutotuneMode::Cached);
  EXPECT_EQ(plan.config().str(), tuned.config.str()) << "the run after the picks moved kept its old config";
  forward(b.tq, b.tk, b.tv, b.to, b.tlse, opts); // cached mode: the same pick
  KILN_CU_CHECK(cuCtxSynchronize, "waiting for the runs");
  expect_same_outputs(b);
}

TEST(GpuForwardPlan, RejectsAnAddressValidationWouldReject) {
  KILN_REQUIRE_GPU();
  ScopedEnv off("KILN_AUTOTUNE", "off");
  const AttentionProblem p = problem(1, 2, 2, 64, 64, 64, DType::f16, 0, false);
  Buffers a(p, 7);
  ForwardPlan plan(a.tq, a.tk, a.tv, a.to, a.tlse, attention_options_for(p));
  ForwardAddresses at = a.plan_addresses();
  at.v += 8;
  EXPECT_THROW(plan.run(at), Error);
  at = a.plan_addresses();
  at.o = a.q.ptr(); // O over Q
  EXPECT_THROW(plan.run(at), Error);
  KILN_CU_CHECK(cuCtxSynchronize, "waiting");
  // Nothing was launched: the plan's O is still the poison.
  const std::vector<uint8_t> poisoned = bytes_of(upload(make_outputs(p).o));
  EXPECT_EQ(bytes_of(a.plan_o), poisoned);
}

} // namespace
