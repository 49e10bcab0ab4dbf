// The double-precision attention references (kernels/attention/attention_problem.h, attention_bwd_problem.h),
// which every kernel test and the GPU suites check against: rows and keys computed in parallel give the bits of
// one thread, and the backward's gradients are those of Σ O ∘ dO by central differences. Also
// support/parallel_chunks.h, which runs them.
#include "kernels/attention/attention_bwd_problem.h"
#include "kernels/attention/attention_problem.h"
#include "support/error.h"
#include "support/parallel_chunks.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <random>

namespace kiln {
namespace {

TEST(ParallelChunks, RunsEveryItemOnceAndRethrowsAChunksError) {
  for (int64_t n : {0, 1, 7, 1000}) {
    std::vector<std::atomic<int>> seen(static_cast<size_t>(n));
    parallel_chunks(n, [&](int64_t begin, int64_t end) {
      EXPECT_LE(0, begin);
      EXPECT_LE(begin, end);
      EXPECT_LE(end, n);
      for (int64_t i = begin; i < end; ++i)
        ++seen[static_cast<size_t>(i)];
    });
    for (int64_t i = 0; i < n; ++i)
      EXPECT_EQ(seen[static_cast<size_t>(i)], 1) << "n = " << n << ", item " << i;
  }
  int chunks = 0;
  parallel_chunks(
      100,
      [&](int64_t begin, int64_t end) {
        ++chunks;
        EXPECT_EQ(end - begin, 100);
      },
      1);
  EXPECT_EQ(chunks, 1) << "max_threads = 1 runs one chunk";
  EXPECT_THROW(parallel_chunks(64, [](int64_t begin, int64_t) {
                 if (begin == 0)
                   fail("chunk failed");
               }),
               Error);
}

// Random logical tensors for `p` (dO too).
AttentionTensors64 random_tensors(const AttentionProblem& p, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> u(-1.0, 1.0);
  auto fill = [&](int64_t n) {
    std::vector<double> v(static_cast<size_t>(n));
    for (double& x : v)
      x = u(rng);
    return v;
  };
  return {fill(q_numel(p)), fill(kv_numel(p)), fill(kv_numel(p)), fill(q_numel(p))};
}

AttentionProblem small_problem(int causal) {
  AttentionProblem p;
  p.B = 2, p.H = 4, p.H_KV = 2, p.N_Q = 19, p.N_K = 23, p.D = 8, p.causal = causal;
  return p;
}

// An identity score function makes the references run on one thread (a score function may keep state); without
// one they run over every hardware thread. The sums keep their order either way.
TEST(AttentionReference, ParallelRowsAndKeysGiveTheBitsOfOneThread) {
  const ReferenceScoreFn identity = [](int64_t, int64_t, int64_t, int64_t, double s) { return s; };
  const ReferenceScoreFn unit_slope = [](int64_t, int64_t, int64_t, int64_t, double) { return 1.0; };
  for (int causal : {0, 1, 2}) {
    const AttentionProblem p = small_problem(causal);
    const AttentionTensors64 t = random_tensors(p, 7 + causal);
    const AttentionResult parallel = reference_forward(p, t), serial = reference_forward(p, t, identity);
    EXPECT_EQ(parallel.o, serial.o) << p.str();
    EXPECT_EQ(parallel.lse, serial.lse) << p.str();
    const AttentionGrads g = reference_backward(p, t);
    const AttentionGrads one = reference_backward(p, t, ReferenceBackwardScores{identity, unit_slope, {}});
    EXPECT_EQ(g.dq, one.dq) << p.str();
    EXPECT_EQ(g.dk, one.dk) << p.str();
    EXPECT_EQ(g.dv, one.dv) << p.str();
    EXPECT_EQ(g.dq_magnitude, one.dq_magnitude) << p.str();
    EXPECT_EQ(g.dk_magnitude, one.dk_magnitude) << p.str();
    EXPECT_EQ(g.dv_magnitude, one.dv_magnitude) << p.str();
  }
}

// Σ O ∘ dO of the forward reference.
double loss(const AttentionProblem& p, const AttentionTensors64& t) {
  const AttentionResult r = reference_forward(p, t);
  double l = 0;
  for (size_t x = 0; x < r.o.size(); ++x)
    l += r.o[x] * t.dout[x];
  return l;
}

// Each gradient element against a central difference of the loss, GQA with N_Q != N_K, every CAUSAL rule (rows
// that see no key among them: bottom-right with more rows than keys).
TEST(AttentionReference, BackwardIsTheGradientOfTheForward) {
  for (int causal : {0, 1, 2}) {
    AttentionProblem p = small_problem(causal);
    p.B = 1, p.N_Q = causal == 2 ? 7 : 6, p.N_K = causal == 2 ? 5 : 7;
    AttentionTensors64 t = random_tensors(p, 11 + causal);
    const AttentionGrads g = reference_backward(p, t);
    auto check = [&](std::vector<double>& x, const std::vector<double>& grad, const char* name) {
      ASSERT_EQ(x.size(), grad.size());
      for (size_t e = 0; e < x.size(); ++e) {
        const double keep = x[e], h = 1e-5;
        x[e] = keep + h;
        const double up = loss(p, t);
        x[e] = keep - h;
        const double down = loss(p, t);
        x[e] = keep;
        EXPECT_NEAR(grad[e], (up - down) / (2 * h), 1e-7) << name << "[" << e << "] " << p.str();
      }
    };
    check(t.q, g.dq, "dQ");
    check(t.k, g.dk, "dK");
    check(t.v, g.dv, "dV");
  }
}

} // namespace
} // namespace kiln
