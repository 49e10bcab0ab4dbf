#include "kernels/attention/attention_problem.h"

#include "kernels/attention/attention_tiles.h"
#include "kernels/attention/fa1_fwd.h"
#include "kernels/attention/fa2_fwd.h"
#include "kernels/dtype_param.h"
#include "support/parallel_chunks.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

namespace kiln {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

TensorStrides strides_of(const AttentionProblem& p, int64_t heads, int64_t n) {
  if (p.bshd_layout) // [B, N, heads, D]
    return TensorStrides{n * heads * p.D, p.D, heads * p.D};
  return TensorStrides{heads * n * p.D, n * p.D, p.D}; // [B, heads, N, D]
}

int64_t at(const TensorStrides& s, int64_t b, int64_t h, int64_t n, int64_t d) { return element_offset(s, b, h, n, d); }
Config with_problem(Config c, const AttentionProblem& p) { return with_attention_problem(std::move(c), p); }
} // namespace

int64_t element_offset(const TensorStrides& s, int64_t b, int64_t h, int64_t n, int64_t d) {
  return b * s.b + h * s.h + n * s.n + d;
}

void poison(HostBuffer& b) {
  for (int64_t i = 0; i < b.numel(); ++i)
    b.set(i, std::nan(""));
}

bool visible(const AttentionProblem& p, int64_t i, int64_t j) {
  switch (p.causal) {
  case 1: return j <= i;
  case 2: return j <= i + (p.N_K - p.N_Q);
  default: return true;
  }
}

Config with_attention_problem(Config c, const AttentionProblem& p) {
  c.set("HEAD_DIM", p.head_dim_tile());
  c.set("EVEN_D", p.D == p.head_dim_tile() ? 1 : 0);
  if (c.params.contains("SPLIT_D")) {
    c.set("SPLIT_D", p.split_head_dim() ? 1 : 0);
    c.set("EVEN_D", p.D == p.head_dim_columns() ? 1 : 0);
  }
  c.set("CAUSAL", p.causal);
  c.set("K_TRANSPOSED", p.k_transposed ? 1 : 0);
  c.set("DTYPE", dtype_param(p.dtype, "attention"));
  c.set("TF32", p.tf32 ? 1 : 0);
  c.set("EXACT_MASKED_V", p.exact_masked_v ? 1 : 0);
  return c;
}

double AttentionProblem::scale() const { return sm_scale != 0 ? sm_scale : 1.0 / std::sqrt(static_cast<double>(D)); }

int64_t AttentionProblem::head_dim_tile() const {
  int64_t t = 16;
  while (t < D)
    t *= 2;
  return t;
}

bool AttentionProblem::split_head_dim() const {
  const int64_t hd = head_dim_tile();
  return hd >= 64 && D > hd / 2 && D <= kiln::head_dim_columns(hd, true) && !exact_masked_v;
}

int64_t AttentionProblem::head_dim_columns() const {
  return kiln::head_dim_columns(head_dim_tile(), split_head_dim());
}

std::string AttentionProblem::str() const {
  return fmt::format("B{} H{} H_KV{} N_Q{} N_K{} D{} {}{} causal={} {} {}{}", B, H, H_KV, N_Q, N_K, D,
                     dtype_name(dtype), tf32 ? "(tf32)" : "", causal, bshd_layout ? "bshd" : "bhsd",
                     k_transposed ? "kT" : "k", exact_masked_v ? " exact-masked-v" : "");
}

void check_attention_problem(const AttentionProblem& p) {
  for (auto [name, v] : {std::pair{"B", p.B}, {"H", p.H}, {"H_KV", p.H_KV}, {"N_Q", p.N_Q}, {"N_K", p.N_K}, {"D", p.D}})
    if (v < 1)
      fail("attention: {} must be at least 1, got {}", name, v);
  for (auto [name, v] : {std::pair{"B", p.B}, {"H", p.H}, {"H_KV", p.H_KV}, {"N_Q", p.N_Q}, {"N_K", p.N_K}})
    if (v >= kMaxAttentionSize)
      fail("attention: {}={} is too large: the kernels index rows, keys and heads in i32, so sizes must be below "
           "2^31 - 2^16 = {}",
           name, v, kMaxAttentionSize);
  if (p.B * p.H > kMaxAttentionGridY) // both below 2^31: the product cannot overflow
    fail("attention: B * H = {} * {} = {} exceeds {}: the kernels run one program row per (batch, head) and "
         "CUDA's grid holds at most {} in y",
         p.B, p.H, p.B * p.H, kMaxAttentionGridY, kMaxAttentionGridY);
  if (p.H % p.H_KV != 0)
    fail("attention: H={} must be a multiple of H_KV={} (each kv head serves H / H_KV query heads)", p.H, p.H_KV);
  if (p.D > 256)
    fail("attention: head dim D={} exceeds 256, the widest tile the kernels support", p.D);
  if (p.causal < 0 || p.causal > 2)
    fail("attention: causal={} is not a mode; expected 0 (none), 1 (top-left) or 2 (bottom-right)", p.causal);
  if (p.tf32 && p.dtype != DType::f32)
    fail("attention: tf32 applies to f32 inputs, but the dtype is {}", dtype_name(p.dtype));
  (void)dtype_param(p.dtype, "attention");
}

AttentionStrides attention_strides(const AttentionProblem& p) {
  AttentionStrides s;
  s.q = s.o = strides_of(p, p.H, p.N_Q);
  s.k = s.v = strides_of(p, p.H_KV, p.N_K);
  return s;
}

double attention_flops(const AttentionProblem& p) {
  double f = 4.0 * static_cast<double>(p.B) * static_cast<double>(p.H) * static_cast<double>(p.N_Q) *
             static_cast<double>(p.N_K) * static_cast<double>(p.D);
  return p.causal != 0 ? f / 2 : f;
}

int64_t q_numel(const AttentionProblem& p) { return p.B * p.H * p.N_Q * p.D; }
int64_t kv_numel(const AttentionProblem& p) { return p.B * p.H_KV * p.N_K * p.D; }

AttentionInputs make_inputs(const AttentionProblem& p, uint64_t seed, double scale) {
  check_attention_problem(p);
  AttentionInputs in{HostBuffer(p.dtype, q_numel(p), "Q"), HostBuffer(p.dtype, kv_numel(p), "K"),
                     HostBuffer(p.dtype, kv_numel(p), "V")};
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(-scale, scale);
  for (HostBuffer* b : {&in.q, &in.k, &in.v})
    for (int64_t i = 0; i < b->numel(); ++i)
      b->set(i, dist(rng));
  return in;
}

std::vector<double> logical_tensor(const HostBuffer& buf, const TensorStrides& s, int64_t B, int64_t heads,
                                   int64_t n, int64_t D) {
  std::vector<double> out;
  out.reserve(static_cast<size_t>(B * heads * n * D));
  for (int64_t b = 0; b < B; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t i = 0; i < n; ++i)
        for (int64_t d = 0; d < D; ++d)
          out.push_back(buf.get(at(s, b, h, i, d)));
  return out;
}

AttentionTensors64 logical_tensors(const AttentionProblem& p, const AttentionInputs& in) {
  const AttentionStrides s = attention_strides(p);
  return AttentionTensors64{logical_tensor(in.q, s.q, p.B, p.H, p.N_Q, p.D),
                            logical_tensor(in.k, s.k, p.B, p.H_KV, p.N_K, p.D),
                            logical_tensor(in.v, s.v, p.B, p.H_KV, p.N_K, p.D), {}};
}

AttentionResult reference_forward(const AttentionProblem& p, const AttentionTensors64& t) {
  return reference_forward(p, t, ReferenceScoreFn());
}

AttentionResult reference_forward(const AttentionProblem& p, const AttentionTensors64& t,
                                  const ReferenceScoreFn& score) {
  check_attention_problem(p);
  const double scale = p.scale();
  const size_t D = static_cast<size_t>(p.D);
  AttentionResult r;
  r.o.assign(static_cast<size_t>(p.B * p.H * p.N_Q) * D, 0.0);
  r.lse.assign(static_cast<size_t>(p.B * p.H * p.N_Q), -kInf);
  // Rows in parallel, each on its own: a score function (a mod's reference, which may keep state) runs on one
  // thread.
  const int64_t rows = p.B * p.H * p.N_Q;
  parallel_chunks(rows, [&](int64_t begin, int64_t end) {
    std::vector<double> scores(static_cast<size_t>(p.N_K));
    for (int64_t row_index = begin; row_index < end; ++row_index) {
      const int64_t i = row_index % p.N_Q, h = row_index / p.N_Q % p.H, b = row_index / (p.N_Q * p.H);
      const int64_t hk = h / (p.H / p.H_KV);
      const double* k = &t.k[static_cast<size_t>((b * p.H_KV + hk) * p.N_K) * D];
      const double* v = &t.v[static_cast<size_t>((b * p.H_KV + hk) * p.N_K) * D];
      const size_t row = static_cast<size_t>(row_index);
      const double* q = &t.q[row * D];
      // kiln's non-finite semantics (docs/guarantees.md): a score is Q·K in f32, so one beyond f32's range is
      // ±inf; a NaN or +inf score among the row's visible keys makes its O and LSE NaN; a score of -inf is a
      // masked key.
      double m = -kInf;
      bool poisoned = false;
      for (int64_t j = 0; j < p.N_K; ++j) {
        double dotp = 0;
        for (size_t d = 0; d < D; ++d)
          dotp += q[d] * k[static_cast<size_t>(j) * D + d];
        if (std::abs(dotp) > std::numeric_limits<float>::max())
          dotp = std::copysign(kInf, dotp);
        const double s = !visible(p, i, j) ? -kInf : score ? score(b, h, i, j, dotp * scale) : dotp * scale;
        scores[static_cast<size_t>(j)] = s;
        poisoned = poisoned || std::isnan(s) || s == kInf;
        if (!std::isnan(s))
          m = std::max(m, s);
      }
      if (poisoned) {
        std::fill_n(r.o.begin() + static_cast<std::ptrdiff_t>(row * D), D, std::nan(""));
        r.lse[row] = std::nan("");
        continue;
      }
      if (m == -kInf)
        continue; // no visible key (or only scores of -inf): O = 0, LSE = -inf
      double l = 0;
      double* o = &r.o[row * D];
      for (int64_t j = 0; j < p.N_K; ++j) {
        double w = std::exp(scores[static_cast<size_t>(j)] - m);
        if (w == 0)
          continue;
        l += w;
        for (size_t d = 0; d < D; ++d)
          o[d] += w * v[static_cast<size_t>(j) * D + d];
      }
      for (size_t d = 0; d < D; ++d)
        o[d] /= l;
      r.lse[row] = m + std::log(l);
    }
  }, score ? 1 : 0);
  return r;
}

AttentionResult reference(const AttentionProblem& p, const AttentionInputs& in) {
  check_attention_problem(p);
  return reference_forward(p, logical_tensors(p, in));
}

Config default_fa2_config(const AttentionProblem& p) {
  Config c = with_problem(fa2_fwd_def().default_config(), p);
  const int64_t hd = p.head_dim_tile();
  // 128 x 64 tiles as FlashAttention-2 uses on sm_80+; wider heads and f32 halve the K/V tile so that
  // the staged K/V ring still fits in shared memory.
  c.set("BLOCK_M", 128);
  c.set("BLOCK_N", hd > 128 || p.dtype == DType::f32 ? 32 : 64);
  // Measured on an H200 (docs/worklog.md): 128 x 64 tiles, 4 warps (32 rows each) and 2 stages are
  // fastest at D = 64 and D = 128; D = 256 needs 8 warps to keep the O tile in registers.
  c.num_warps = hd > 128 ? 8 : 4;
  c.num_stages = 2;
  if (p.dtype == DType::f32 && hd > 128) {
    // 4-byte Q and K/V tiles at HEAD_DIM = 256: 64 x 16 tiles are the widest that fit both sm_80 (163 KiB a
    // block) and sm_90 (227 KiB); 128 x 32 would need 304 KiB.
    c.set("BLOCK_M", 64);
    c.set("BLOCK_N", 16);
    c.num_warps = 4;
  }
  return c;
}

Config default_fa1_config(const AttentionProblem& p) {
  Config c = with_problem(fa1_fwd_def().default_config(), p);
  c.set("BLOCK_M", 64);
  c.set("BLOCK_N", p.head_dim_tile() > 128 || p.dtype == DType::f32 ? 32 : 64);
  c.num_warps = 4;
  c.num_stages = 2;
  return c;
}

std::vector<Config> fa2_config_space(const AttentionProblem& p) {
  std::vector<Config> cs;
  for (const Config& c : fa2_fwd_def().config_space())
    cs.push_back(with_problem(c, p));
  return cs;
}

void check_attention_config(const AttentionProblem& p, const Config& config) {
  check_param_values("attention", attention_param_defs(), config);
  Config want = with_problem(config, p);
  for (const char* name : {"HEAD_DIM", "EVEN_D", "CAUSAL", "K_TRANSPOSED", "DTYPE", "TF32", "EXACT_MASKED_V", "SPLIT_D"})
    if (config.get_or(name, 0) != want.get_or(name, 0))
      fail("attention: config has {}={} but the problem ({}) needs {}={}", name, config.get(name), p.str(), name,
           want.get(name));
}

SizeArgs attention_size_args(const AttentionProblem& p) {
  return {{"B", p.B}, {"H", p.H}, {"H_KV", p.H_KV}, {"N_Q", p.N_Q}, {"N_K", p.N_K}, {"D", p.D}};
}

AttentionOutputs make_outputs(const AttentionProblem& p) {
  AttentionOutputs out{HostBuffer(p.dtype, q_numel(p), "O"), HostBuffer(DType::f32, p.B * p.H * p.N_Q, "LSE")};
  poison(out.o);
  poison(out.lse);
  return out;
}

Fa1Scratch make_fa1_scratch(const AttentionProblem& p) {
  const int64_t rows = p.B * p.H * p.N_Q;
  Fa1Scratch s{HostBuffer(DType::f32, rows * p.head_dim_tile(), "OACC"), HostBuffer(DType::f32, rows, "L"),
               HostBuffer(DType::f32, rows, "M")};
  poison(s.oacc);
  poison(s.l);
  poison(s.m);
  return s;
}

std::vector<InterpArg> fa2_interp_args(const AttentionProblem& p, AttentionInputs& in, AttentionOutputs& out) {
  const AttentionStrides s = attention_strides(p);
  std::vector<InterpArg> args = {InterpArg::ptr(in.q), InterpArg::ptr(in.k), InterpArg::ptr(in.v),
                                 InterpArg::ptr(out.o), InterpArg::ptr(out.lse), InterpArg::of_float(p.scale())};
  for (int64_t v : {p.B, p.H, p.H_KV, p.N_Q, p.N_K, p.D})
    args.push_back(InterpArg::of_int(v));
  for (const TensorStrides* t : {&s.q, &s.k, &s.v, &s.o})
    for (int64_t v : {t->b, t->h, t->n})
      args.push_back(InterpArg::of_int(v));
  return args;
}

std::vector<InterpArg> fa1_interp_args(const AttentionProblem& p, AttentionInputs& in, AttentionOutputs& out,
                                       Fa1Scratch& scratch) {
  std::vector<InterpArg> args = fa2_interp_args(p, in, out);
  args.push_back(InterpArg::ptr(scratch.oacc));
  args.push_back(InterpArg::ptr(scratch.l));
  args.push_back(InterpArg::ptr(scratch.m));
  return args;
}

AttentionResult gather_outputs(const AttentionProblem& p, const AttentionOutputs& out) {
  const AttentionStrides s = attention_strides(p);
  AttentionResult r;
  r.o.resize(static_cast<size_t>(q_numel(p)));
  r.lse.resize(static_cast<size_t>(p.B * p.H * p.N_Q));
  size_t n = 0;
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t h = 0; h < p.H; ++h)
      for (int64_t i = 0; i < p.N_Q; ++i)
        for (int64_t d = 0; d < p.D; ++d)
          r.o[n++] = out.o.get(at(s.o, b, h, i, d));
  for (size_t i = 0; i < r.lse.size(); ++i)
    r.lse[i] = out.lse.get(static_cast<int64_t>(i));
  return r;
}

AttentionResult run_fa2_interpreted(const AttentionProblem& p, const Config& config, const AttentionInputs& in,
                                    Executor executor) {
  check_attention_problem(p);
  check_attention_config(p, config);
  AttentionInputs inputs = in;
  AttentionOutputs out = make_outputs(p);
  execute(executor, build_fa2_fwd(config), fa2_fwd_def().grid(config, attention_size_args(p)),
            fa2_interp_args(p, inputs, out));
  return gather_outputs(p, out);
}

AttentionResult run_fa1_interpreted(const AttentionProblem& p, const Config& config, const AttentionInputs& in,
                                    Executor executor) {
  check_attention_problem(p);
  check_attention_config(p, config);
  AttentionInputs inputs = in;
  AttentionOutputs out = make_outputs(p);
  Fa1Scratch scratch = make_fa1_scratch(p);
  execute(executor, build_fa1_fwd(config), fa1_fwd_def().grid(config, attention_size_args(p)),
            fa1_interp_args(p, inputs, out, scratch));
  return gather_outputs(p, out);
}

} // namespace kiln
