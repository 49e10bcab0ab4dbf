#include "bench/attention_bwd_reference.h"

#include "support/parallel_chunks.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <set>

namespace kiln::bench {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

double dot(const double* a, const double* b, size_t n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += a[i] * b[i];
    s1 += a[i + 1] * b[i + 1];
    s2 += a[i + 2] * b[i + 2];
    s3 += a[i + 3] * b[i + 3];
  }
  for (; i < n; ++i)
    s0 += a[i] * b[i];
  return (s0 + s1) + (s2 + s3);
}

// Rows [0, n) of one head of `buf` (strides `s`) in double, row-major [n, D].
std::vector<double> load_head(const HostBuffer& buf, const TensorStrides& s, int64_t b, int64_t h, int64_t n,
                              int64_t D) {
  std::vector<double> out(static_cast<size_t>(n * D));
  for (int64_t i = 0; i < n; ++i)
    for (int64_t d = 0; d < D; ++d)
      out[static_cast<size_t>(i * D + d)] = buf.get(element_offset(s, b, h, i, d));
  return out;
}

// Sorted distinct picks from [0, n): 0, n − 1, and random ones up to `count`.
std::vector<int64_t> pick(int64_t n, int64_t count, std::mt19937_64& rng) {
  std::set<int64_t> picked = {0, n - 1};
  while (static_cast<int64_t>(picked.size()) < std::min(count, n))
    picked.insert(std::uniform_int_distribution<int64_t>(0, n - 1)(rng));
  return {picked.begin(), picked.end()};
}
} // namespace

BwdSample sample_bwd(const AttentionProblem& p, int64_t kv_heads, int64_t rows_per_head, int64_t keys_per_head,
                     uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t pairs = p.B * p.H_KV, group = p.H / p.H_KV;
  std::set<int64_t> heads = {pairs - 1}; // indices b · H_KV + hk; the last one always
  while (static_cast<int64_t>(heads.size()) < std::min(pairs, std::max<int64_t>(kv_heads, 1)))
    heads.insert(std::uniform_int_distribution<int64_t>(0, pairs - 1)(rng));
  BwdSample s;
  for (int64_t bh : heads) {
    const int64_t b = bh / p.H_KV, hk = bh % p.H_KV;
    for (int64_t h = hk * group; h < (hk + 1) * group; ++h)
      for (int64_t i : pick(p.N_Q, rows_per_head, rng))
        s.rows.push_back({b, h, i});
    for (int64_t j : pick(p.N_K, keys_per_head, rng))
      s.keys.push_back({b, hk, j});
  }
  return s;
}

SampledGrads sampled_reference_backward(const AttentionProblem& p, const AttentionInputs& in,
                                        const HostBuffer& dout, const BwdSample& s) {
  check_attention_problem(p);
  const AttentionStrides st = attention_strides(p);
  const int64_t D = p.D, NQ = p.N_Q, NK = p.N_K, group = p.H / p.H_KV;
  const size_t Dz = static_cast<size_t>(D);
  const double scale = p.scale();
  SampledGrads g;
  g.dq.assign(s.rows.size() * Dz, 0.0);
  g.dk.assign(s.keys.size() * Dz, 0.0);
  g.dv.assign(s.keys.size() * Dz, 0.0);
  // The (b, kv head) pairs the sample touches.
  std::set<std::pair<int64_t, int64_t>> pairs;
  for (const BwdSample::Row& r : s.rows)
    pairs.insert({r.b, r.h / group});
  for (const BwdSample::Key& k : s.keys)
    pairs.insert({k.b, k.hk});
  for (auto [b, hk] : pairs) {
    const std::vector<double> k = load_head(in.k, st.k, b, hk, NK, D), v = load_head(in.v, st.v, b, hk, NK, D);
    for (int64_t h = hk * group; h < (hk + 1) * group; ++h) {
      const std::vector<double> q = load_head(in.q, st.q, b, h, NQ, D), o_grad = load_head(dout, st.q, b, h, NQ, D);
      // Every row's LSE and Delta = Σ_j P_ij dP_ij, dP_ij = dO_i · V_j.
      std::vector<double> lse(static_cast<size_t>(NQ), -kInf), delta(static_cast<size_t>(NQ), 0.0);
      parallel_chunks(NQ, [&](int64_t begin, int64_t end) {
        std::vector<double> scores(static_cast<size_t>(NK));
        for (int64_t i = begin; i < end; ++i) {
          const double* qi = &q[static_cast<size_t>(i) * Dz];
          double m = -kInf;
          for (int64_t j = 0; j < NK; ++j) {
            scores[j] = visible(p, i, j) ? dot(qi, &k[static_cast<size_t>(j) * Dz], Dz) * scale : -kInf;
            m = std::max(m, scores[j]);
          }
          if (m == -kInf)
            continue; // sees no key: no gradient flows through this row
          double l = 0;
          for (int64_t j = 0; j < NK; ++j)
            l += scores[j] == -kInf ? 0.0 : std::exp(scores[j] - m);
          const double row_lse = m + std::log(l);
          double dl = 0;
          for (int64_t j = 0; j < NK; ++j)
            if (scores[j] != -kInf)
              dl += std::exp(scores[j] - row_lse) *
                    dot(&o_grad[static_cast<size_t>(i) * Dz], &v[static_cast<size_t>(j) * Dz], Dz);
          lse[static_cast<size_t>(i)] = row_lse;
          delta[static_cast<size_t>(i)] = dl;
        }
      });
      for (double l : lse)
        if (std::isfinite(l))
          g.max_abs_lse = std::max(g.max_abs_lse, std::abs(l));
      // dS_ij = P_ij (dP_ij − Delta_i) for one (i, j) that i sees; 0 (and P = 0) otherwise.
      auto grads_of = [&](int64_t i, int64_t j, double& prob) {
        const size_t iz = static_cast<size_t>(i), jz = static_cast<size_t>(j);
        if (!visible(p, i, j) || lse[iz] == -kInf) {
          prob = 0;
          return 0.0;
        }
        prob = std::exp(dot(&q[iz * Dz], &k[jz * Dz], Dz) * scale - lse[iz]);
        return prob * (dot(&o_grad[iz * Dz], &v[jz * Dz], Dz) - delta[iz]);
      };
      // dQ of this head's sampled rows.
      std::vector<size_t> rows;
      for (size_t r = 0; r < s.rows.size(); ++r)
        if (s.rows[r].b == b && s.rows[r].h == h)
          rows.push_back(r);
      parallel_chunks(static_cast<int64_t>(rows.size()), [&](int64_t begin, int64_t end) {
        for (int64_t x = begin; x < end; ++x) {
          const size_t r = rows[static_cast<size_t>(x)];
          double* dq = &g.dq[r * Dz];
          for (int64_t j = 0; j < NK; ++j) {
            double prob = 0;
            const double ds = grads_of(s.rows[r].i, j, prob) * scale;
            if (ds != 0)
              for (size_t d = 0; d < Dz; ++d)
                dq[d] += ds * k[static_cast<size_t>(j) * Dz + d];
          }
        }
      });
      // dK and dV of the pair's sampled keys: this query head's share.
      std::vector<size_t> keys;
      for (size_t r = 0; r < s.keys.size(); ++r)
        if (s.keys[r].b == b && s.keys[r].hk == hk)
          keys.push_back(r);
      parallel_chunks(static_cast<int64_t>(keys.size()), [&](int64_t begin, int64_t end) {
        for (int64_t x = begin; x < end; ++x) {
          const size_t r = keys[static_cast<size_t>(x)];
          double *dk = &g.dk[r * Dz], *dv = &g.dv[r * Dz];
          for (int64_t i = 0; i < NQ; ++i) {
            double prob = 0;
            const double ds = grads_of(i, s.keys[r].j, prob) * scale;
            if (prob == 0)
              continue;
            for (size_t d = 0; d < Dz; ++d) {
              dv[d] += prob * o_grad[static_cast<size_t>(i) * Dz + d];
              dk[d] += ds * q[static_cast<size_t>(i) * Dz + d];
            }
          }
        }
      });
    }
  }
  return g;
}

SampledGrads gather_sampled_grads(const AttentionProblem& p, const HostBuffer& dq, const HostBuffer& dk,
                                  const HostBuffer& dv, const BwdSample& s) {
  const AttentionStrides st = attention_strides(p);
  SampledGrads g;
  for (const BwdSample::Row& r : s.rows)
    for (int64_t d = 0; d < p.D; ++d)
      g.dq.push_back(dq.get(element_offset(st.q, r.b, r.h, r.i, d)));
  for (const BwdSample::Key& k : s.keys)
    for (int64_t d = 0; d < p.D; ++d) {
      g.dk.push_back(dk.get(element_offset(st.k, k.b, k.hk, k.j, d)));
      g.dv.push_back(dv.get(element_offset(st.k, k.b, k.hk, k.j, d)));
    }
  return g;
}

double sampled_backward_macs(const AttentionProblem& p, int64_t kv_heads) {
  return static_cast<double>(std::min(kv_heads, p.B * p.H_KV)) * static_cast<double>(p.H / p.H_KV) * 2.0 *
         static_cast<double>(p.N_Q) * static_cast<double>(p.N_K) * static_cast<double>(p.D);
}

} // namespace kiln::bench
