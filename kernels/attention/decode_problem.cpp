#include "kernels/attention/decode_problem.h"

#include "kernels/attention/attention_tiles.h"
#include "kernels/attention/decode_combine.h"
#include "kernels/attention/decode_split.h"
#include "kernels/compare.h"
#include "kernels/dtype_param.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>

namespace kiln {

namespace {

// The attention problem of one sequence (B = 1) with n_k keys: what the reference and the attention configs
// are built from.
AttentionProblem sequence_problem(const DecodeProblem& p, int64_t n_k) {
  AttentionProblem a;
  a.B = 1, a.H = p.H, a.H_KV = p.H_KV, a.N_Q = p.N_Q, a.N_K = std::max<int64_t>(n_k, 1), a.D = p.D;
  a.dtype = p.dtype;
  a.causal = p.causal;
  a.sm_scale = p.sm_scale;
  return a;
}

// Element (key j of sequence b, kv head h, d) of the cache, through the block table when paged.
int64_t cache_index(const DecodeProblem& p, const DecodeInputs& in, int64_t b, int64_t j, int64_t h,
                    int64_t d) {
  int64_t row = b * p.N_K + j; // contiguous: [B, N_K, H_KV, D]
  if (p.paged())
    row = in.block_table.get_int(b * p.max_pages() + j / p.page_size) * p.page_size + j % p.page_size;
  return (row * p.H_KV + h) * p.D + d;
}

} // namespace

int64_t DecodeProblem::seqlen(int64_t b) const {
  return seqlens_k.empty() ? N_K : seqlens_k[static_cast<size_t>(b)];
}
int64_t DecodeProblem::max_pages() const { return paged() ? (N_K + page_size - 1) / page_size : 1; }
double DecodeProblem::scale() const { return sequence_problem(*this, N_K).scale(); }
int64_t DecodeProblem::head_dim_tile() const { return sequence_problem(*this, N_K).head_dim_tile(); }

std::string DecodeProblem::str() const {
  std::string s =
      fmt::format("B{} H{} H_KV{} N_Q{} N_K{} D{} {}", B, H, H_KV, N_Q, N_K, D, dtype_name(dtype));
  if (causal)
    s += fmt::format(" causal={}", causal);
  if (paged())
    s += fmt::format(" pages={}", page_size);
  if (!seqlens_k.empty())
    s += fmt::format(" seqlens=[{}]", fmt::join(seqlens_k, ","));
  return s;
}

DecodeInputs make_decode_inputs(const DecodeProblem& p, uint64_t seed, double scale) {
  const int64_t cache_rows = p.paged() ? p.num_pages() * p.page_size : p.B * p.N_K;
  DecodeInputs in{HostBuffer(p.dtype, p.B * p.N_Q * p.H * p.D, "Q"),
                  HostBuffer(p.dtype, cache_rows * p.H_KV * p.D, "K_CACHE"),
                  HostBuffer(p.dtype, cache_rows * p.H_KV * p.D, "V_CACHE"),
                  HostBuffer(DType::i32, p.B * p.max_pages(), "BLOCK_TABLE"),
                  HostBuffer(DType::i32, p.B, "SEQLENS_K")};
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(-scale, scale);
  for (int64_t i = 0; i < in.q.numel(); ++i)
    in.q.set(i, dist(rng));
  poison(in.k); // rows past a sequence's keys stay NaN
  poison(in.v);
  std::vector<int64_t> pages(static_cast<size_t>(p.num_pages()));
  std::iota(pages.begin(), pages.end(), 0);
  std::shuffle(pages.begin(), pages.end(), rng);
  for (int64_t b = 0; b < p.B; ++b) {
    const int64_t n_k = p.seqlen(b);
    in.seqlens_k.set_int(b, n_k);
    for (int64_t slot = 0; slot < p.max_pages(); ++slot) // a slot past the keys names no page: never read
      in.block_table.set_int(b * p.max_pages() + slot,
                             p.paged() && slot * p.page_size < n_k
                                 ? pages[static_cast<size_t>(b * p.max_pages() + slot)]
                                 : 0x3fffffff);
    for (int64_t j = 0; j < n_k; ++j)
      for (int64_t h = 0; h < p.H_KV; ++h)
        for (int64_t d = 0; d < p.D; ++d) {
          in.k.set(cache_index(p, in, b, j, h, d), dist(rng));
          in.v.set(cache_index(p, in, b, j, h, d), dist(rng));
        }
  }
  return in;
}

AttentionResult decode_reference(const DecodeProblem& p, const DecodeInputs& in) {
  const size_t rows = static_cast<size_t>(p.H * p.N_Q), D = static_cast<size_t>(p.D);
  AttentionResult r;
  r.o.assign(static_cast<size_t>(p.B) * rows * D, 0.0);
  r.lse.assign(static_cast<size_t>(p.B) * rows, -kInfinity);
  for (int64_t b = 0; b < p.B; ++b) {
    const int64_t n_k = p.seqlen(b);
    if (n_k == 0)
      continue; // no key: O = 0, LSE = −inf
    const AttentionProblem a = sequence_problem(p, n_k);
    AttentionTensors64 t;
    for (int64_t h = 0; h < p.H; ++h) // Q [B, N_Q, H, D] -> [1, H, N_Q, D]
      for (int64_t i = 0; i < p.N_Q; ++i)
        for (int64_t d = 0; d < p.D; ++d)
          t.q.push_back(in.q.get(((b * p.N_Q + i) * p.H + h) * p.D + d));
    for (int64_t h = 0; h < p.H_KV; ++h)
      for (int64_t j = 0; j < n_k; ++j)
        for (int64_t d = 0; d < p.D; ++d) {
          t.k.push_back(in.k.get(cache_index(p, in, b, j, h, d)));
          t.v.push_back(in.v.get(cache_index(p, in, b, j, h, d)));
        }
    const AttentionResult one = reference_forward(a, t);
    std::copy(one.o.begin(), one.o.end(),
              r.o.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(b) * rows * D));
    std::copy(one.lse.begin(), one.lse.end(),
              r.lse.begin() + static_cast<std::ptrdiff_t>(static_cast<size_t>(b) * rows));
  }
  return r;
}

Config default_decode_split_config(const DecodeProblem& p) {
  Config c = with_attention_problem(decode_split_def().default_config(), sequence_problem(p, p.N_K));
  c.set("BLOCK_M", std::clamp<int64_t>(next_pow2(p.group() * p.N_Q), 16, 64));
  c.set("BLOCK_N", p.paged() ? std::min<int64_t>(64, p.page_size) : 64);
  c.set("PAGED", p.paged() ? 1 : 0);
  c.set("SEQLENS_K", p.has_seqlens() ? 1 : 0);
  return c;
}

Config default_decode_combine_config(const DecodeProblem& p) {
  Config c = decode_combine_def().default_config();
  c.set("HEAD_DIM", p.head_dim_tile());
  c.set("EVEN_D", p.D == p.head_dim_tile() ? 1 : 0);
  c.set("DTYPE", dtype_param(p.dtype, "decode_combine"));
  return c;
}

void check_decode_split_config(const DecodeProblem& p, const Config& c) {
  decode_split_def().check(c);
  const Config want = default_decode_split_config(p);
  for (const char* name : {"HEAD_DIM", "EVEN_D", "CAUSAL", "DTYPE", "PAGED", "SEQLENS_K"})
    if (c.get(name) != want.get(name))
      fail("decode_split: config has {}={} but the problem ({}) needs {}={}", name, c.get(name), p.str(),
           name, want.get(name));
  if (p.paged() && c.get("BLOCK_N") > p.page_size)
    fail("decode_split: config has BLOCK_N={}, wider than a page of {} keys; a key tile must lie in one page",
         c.get("BLOCK_N"), p.page_size);
}

SizeArgs decode_size_args(const DecodeProblem& p, int64_t num_splits) {
  return {{"B", p.B},     {"H", p.H}, {"H_KV", p.H_KV},           {"N_Q", p.N_Q},
          {"N_K", p.N_K}, {"D", p.D}, {"PAGE_SIZE", p.page_size}, {"NUM_SPLITS", num_splits}};
}

int64_t decode_row_tiles(const DecodeProblem& p, const Config& split_config) {
  const int64_t bm = split_config.get("BLOCK_M");
  return (p.group() * p.N_Q + bm - 1) / bm;
}

int64_t choose_num_splits(int64_t programs, int64_t key_tiles, int64_t slots) {
  if (programs <= 0 || key_tiles <= 1 || slots <= 0)
    return 1;
  const int64_t max_splits = std::min<int64_t>({128, slots, key_tiles});
  auto efficiency = [&](int64_t s) { // the last wave's share of full waves
    const double waves = static_cast<double>(programs * s) / static_cast<double>(slots);
    return waves / std::ceil(waves);
  };
  double best = 0;
  for (int64_t s = 1; s <= max_splits; ++s)
    best = std::max(best, efficiency(s));
  for (int64_t s = 1; s <= max_splits; ++s) {
    // s splits that leave a split as many tiles as s − 1 do are no better than s − 1 (FlashAttention's rule).
    const bool same_tiles = s > 1 && (key_tiles + s - 1) / s == (key_tiles + s - 2) / (s - 1);
    if (!same_tiles && efficiency(s) >= 0.85 * best)
      return s;
  }
  return 1;
}

int64_t decode_workspace_floats(int64_t rows, int64_t D, int64_t num_splits) {
  return num_splits * rows * (D + 1);
}

AttentionResult run_decode(const DecodeProblem& p, const Config& split, const Config& combine,
                           int64_t num_splits, const DecodeInputs& in, Executor executor) {
  check_decode_split_config(p, split);
  decode_combine_def().check(combine);
  const int64_t rows = p.B * p.H * p.N_Q;
  DecodeInputs inputs = in; // the interpreter takes buffers by reference; the caller's stay untouched
  HostBuffer o_part(DType::f32, num_splits * rows * p.D, "O_PART"),
      lse_part(DType::f32, num_splits * rows, "LSE_PART");
  HostBuffer o(p.dtype, rows * p.D, "O"), lse(DType::f32, rows, "LSE");
  for (HostBuffer* b : {&o_part, &lse_part, &o, &lse})
    poison(*b);
  const SizeArgs sizes = decode_size_args(p, num_splits);
  const int64_t kv_row = p.H_KV * p.D; // cache strides: [pages or B, rows, H_KV, D]
  const int64_t kv_b = (p.paged() ? p.page_size : p.N_K) * kv_row;
  std::vector<InterpArg> split_args = {InterpArg::ptr(inputs.q),         InterpArg::ptr(inputs.k),
                                       InterpArg::ptr(inputs.v),         InterpArg::ptr(inputs.block_table),
                                       InterpArg::ptr(inputs.seqlens_k), InterpArg::ptr(o_part),
                                       InterpArg::ptr(lse_part),         InterpArg::of_float(p.scale())};
  for (int64_t n : {p.B, p.H, p.H_KV, p.N_Q, p.N_K, p.D, std::max<int64_t>(p.page_size, 1), num_splits})
    split_args.push_back(InterpArg::of_int(n));
  for (int64_t s : {p.N_Q * p.H * p.D, p.H * p.D, p.D, kv_b, kv_row, p.D, kv_b, kv_row, p.D, p.max_pages()})
    split_args.push_back(InterpArg::of_int(s));
  execute(executor, build_decode_split(split), decode_split_def().grid(split, sizes), split_args);

  std::vector<InterpArg> combine_args = {InterpArg::ptr(o_part), InterpArg::ptr(lse_part), InterpArg::ptr(o),
                                         InterpArg::ptr(lse)};
  for (int64_t n : {p.B, p.H, p.N_Q, p.D, num_splits})
    combine_args.push_back(InterpArg::of_int(n));
  for (int64_t s : {p.N_Q * p.H * p.D, p.H * p.D, p.D})
    combine_args.push_back(InterpArg::of_int(s));
  execute(executor, build_decode_combine(combine), decode_combine_def().grid(combine, sizes), combine_args);

  AttentionResult r; // O [B, N_Q, H, D] -> logical [B, H, N_Q, D]
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t h = 0; h < p.H; ++h)
      for (int64_t i = 0; i < p.N_Q; ++i)
        for (int64_t d = 0; d < p.D; ++d)
          r.o.push_back(o.get(((b * p.N_Q + i) * p.H + h) * p.D + d));
  r.lse = to_doubles(lse);
  return r;
}

} // namespace kiln
