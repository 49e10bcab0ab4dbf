#include "bench/attention_sampled_reference.h"

#include <algorithm>
#include <cmath>
#include <future>
#include <limits>
#include <random>
#include <set>

namespace kiln::bench {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
constexpr int64_t kMaxHeadsSampled = 8;

int64_t element(const TensorStrides& s, int64_t b, int64_t h, int64_t n, int64_t d) {
  return b * s.b + h * s.h + n * s.n + d;
}

// Whether query i sees key j; CAUSAL 1 is top-left (PyTorch's is_causal), 2 bottom-right.
bool key_visible(const AttentionProblem& p, int64_t i, int64_t j) {
  if (p.causal == 1)
    return j <= i;
  if (p.causal == 2)
    return j <= i + (p.N_K - p.N_Q);
  return true;
}

// The rows of one (b, h) pair against that pair's kv head, converted once to double.
void reference_for_head(const AttentionProblem& p, const AttentionInputs& in,
                        const std::vector<QueryRow>& rows, size_t first, size_t last,
                        const ReferenceScoreFn& score, AttentionResult& out) {
  const AttentionStrides s = attention_strides(p);
  const int64_t b = rows[first].b, h = rows[first].h, hk = h / (p.H / p.H_KV);
  const size_t D = static_cast<size_t>(p.D), NK = static_cast<size_t>(p.N_K);
  std::vector<double> k(NK * D), v(NK * D);
  for (size_t j = 0; j < NK; ++j)
    for (size_t d = 0; d < D; ++d) {
      k[j * D + d] = in.k.get(element(s.k, b, hk, static_cast<int64_t>(j), static_cast<int64_t>(d)));
      v[j * D + d] = in.v.get(element(s.v, b, hk, static_cast<int64_t>(j), static_cast<int64_t>(d)));
    }
  std::vector<double> q(D), scores(NK);
  for (size_t r = first; r < last; ++r) {
    const int64_t i = rows[r].i;
    for (size_t d = 0; d < D; ++d)
      q[d] = in.q.get(element(s.q, b, h, i, static_cast<int64_t>(d)));
    double m = -kInf;
    for (size_t j = 0; j < NK; ++j) {
      if (!key_visible(p, i, static_cast<int64_t>(j))) {
        scores[j] = -kInf;
        continue;
      }
      double dot = 0;
      for (size_t d = 0; d < D; ++d)
        dot += q[d] * k[j * D + d];
      scores[j] = dot * p.scale();
      if (score)
        scores[j] = score(b, h, i, static_cast<int64_t>(j), scores[j]);
      m = std::max(m, scores[j]);
    }
    double* o = &out.o[r * D];
    std::fill(o, o + D, 0.0);
    if (m == -kInf) {
      out.lse[r] = -kInf;
      continue;
    }
    double l = 0;
    for (size_t j = 0; j < NK; ++j) {
      if (scores[j] == -kInf)
        continue;
      const double w = std::exp(scores[j] - m);
      l += w;
      for (size_t d = 0; d < D; ++d)
        o[d] += w * v[j * D + d];
    }
    for (size_t d = 0; d < D; ++d)
      o[d] /= l;
    out.lse[r] = m + std::log(l);
  }
}
} // namespace

std::vector<QueryRow> sample_query_rows(const AttentionProblem& p, int64_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  const int64_t pairs = p.B * p.H;
  std::set<int64_t> heads; // indices b * H + h
  while (static_cast<int64_t>(heads.size()) < std::min(pairs, kMaxHeadsSampled))
    heads.insert(std::uniform_int_distribution<int64_t>(0, pairs - 1)(rng));
  const int64_t per_head = std::max<int64_t>(2, (count + static_cast<int64_t>(heads.size()) - 1) /
                                                    static_cast<int64_t>(heads.size()));
  std::vector<QueryRow> rows;
  for (int64_t bh : heads) {
    std::set<int64_t> picked = {0, p.N_Q - 1};
    while (static_cast<int64_t>(picked.size()) < std::min(per_head, p.N_Q))
      picked.insert(std::uniform_int_distribution<int64_t>(0, p.N_Q - 1)(rng));
    for (int64_t i : picked)
      rows.push_back(QueryRow{bh / p.H, bh % p.H, i});
  }
  return rows;
}

AttentionResult sampled_reference(const AttentionProblem& p, const AttentionInputs& in,
                                  const std::vector<QueryRow>& rows, const ReferenceScoreFn& score) {
  check_attention_problem(p);
  AttentionResult out;
  out.o.assign(rows.size() * static_cast<size_t>(p.D), 0.0);
  out.lse.assign(rows.size(), -kInf);
  // One task per (b, h) group of consecutive rows: each writes only its own rows of `out`.
  std::vector<std::future<void>> tasks;
  for (size_t first = 0; first < rows.size();) {
    size_t last = first;
    while (last < rows.size() && rows[last].b == rows[first].b && rows[last].h == rows[first].h)
      ++last;
    // A score function keeps state between calls: its heads run in turn.
    tasks.push_back(std::async(score ? std::launch::deferred : std::launch::async,
                               [&, first, last] { reference_for_head(p, in, rows, first, last, score, out); }));
    first = last;
  }
  for (auto& t : tasks)
    t.get();
  return out;
}

AttentionResult gather_rows(const AttentionProblem& p, const HostBuffer& o, const HostBuffer& lse,
                            const std::vector<QueryRow>& rows) {
  const AttentionStrides s = attention_strides(p);
  AttentionResult out;
  out.o.reserve(rows.size() * static_cast<size_t>(p.D));
  for (const QueryRow& r : rows) {
    for (int64_t d = 0; d < p.D; ++d)
      out.o.push_back(o.get(element(s.o, r.b, r.h, r.i, d)));
    out.lse.push_back(lse.get((r.b * p.H + r.h) * p.N_Q + r.i));
  }
  return out;
}

} // namespace kiln::bench
