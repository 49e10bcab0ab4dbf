#include "kernels/attention/attention_varlen_problem.h"

#include "kernels/attention/attention_mods.h"
#include "kernels/attention/fa2_fwd_varlen.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>

namespace kiln {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

std::vector<int32_t> offsets_of(const std::vector<int64_t>& lens) {
  std::vector<int32_t> cu = {0};
  for (int64_t n : lens)
    cu.push_back(static_cast<int32_t>(cu.back() + n));
  return cu;
}

int64_t max_of(const std::vector<int64_t>& v) {
  return v.empty() ? 0 : *std::max_element(v.begin(), v.end());
}
} // namespace

int64_t VarlenProblem::total_q() const {
  return std::accumulate(seqlens_q.begin(), seqlens_q.end(), int64_t{0});
}
int64_t VarlenProblem::total_k() const {
  return std::accumulate(seqlens_k.begin(), seqlens_k.end(), int64_t{0});
}
int64_t VarlenProblem::max_seqlen_q() const { return max_of(seqlens_q); }
int64_t VarlenProblem::max_seqlen_k() const { return max_of(seqlens_k); }
std::vector<int32_t> VarlenProblem::cu_seqlens_q() const { return offsets_of(seqlens_q); }
std::vector<int32_t> VarlenProblem::cu_seqlens_k() const { return offsets_of(seqlens_k); }

AttentionProblem VarlenProblem::shape() const {
  AttentionProblem s;
  s.B = std::max<int64_t>(batch(), 1);
  s.H = H, s.H_KV = H_KV, s.D = D;
  s.N_Q = std::max<int64_t>(max_seqlen_q(), 1);
  s.N_K = std::max<int64_t>(max_seqlen_k(), 1);
  s.dtype = dtype, s.causal = causal, s.sm_scale = sm_scale, s.k_transposed = k_transposed, s.tf32 = tf32;
  s.exact_masked_v = exact_masked_v;
  return s;
}

AttentionProblem VarlenProblem::sequence(int64_t b) const {
  AttentionProblem s = shape();
  s.B = 1;
  s.N_Q = seqlens_q[static_cast<size_t>(b)];
  s.N_K = seqlens_k[static_cast<size_t>(b)];
  return s;
}

double VarlenProblem::flops() const {
  double f = 0;
  for (int64_t b = 0; b < batch(); ++b)
    f += attention_flops(sequence(b));
  return f;
}

std::string VarlenProblem::str() const {
  return fmt::format("varlen q[{}] k[{}] H{} H_KV{} D{} {}{} causal={} {}{}{}", fmt::join(seqlens_q, ","),
                     fmt::join(seqlens_k, ","), H, H_KV, D, dtype_name(dtype), tf32 ? "(tf32)" : "", causal,
                     k_transposed ? "kT" : "k", exact_masked_v ? " exact-masked-v" : "",
                     token_pad ? fmt::format(" pad{}", token_pad) : "");
}

void check_varlen_problem(const VarlenProblem& p) {
  if (p.seqlens_q.size() != p.seqlens_k.size())
    fail("varlen attention: {} query lengths but {} key lengths; expected one of each per sequence",
         p.seqlens_q.size(), p.seqlens_k.size());
  for (const auto* lens : {&p.seqlens_q, &p.seqlens_k})
    for (int64_t n : *lens)
      if (n < 0)
        fail("varlen attention: a sequence length of {} ({}); expected lengths >= 0", n, p.str());
  for (auto [name, v] : {std::pair{"total_q", p.total_q()}, {"total_k", p.total_k()}})
    if (v >= kMaxAttentionSize)
      fail("varlen attention: {}={} is too large: rows and keys are i32, so totals must be below {}", name, v,
           kMaxAttentionSize);
  if (p.token_pad < 0 || p.token_pad % 8 != 0)
    fail("varlen attention: token_pad={} must be a non-negative multiple of 8", p.token_pad);
  check_attention_problem(p.shape()); // H, H_KV, D, dtype, causal, tf32, B · H within the grid
}

VarlenStrides varlen_strides(const VarlenProblem& p) {
  const PackedStrides q{p.H * p.D + p.token_pad, p.D}, kv{p.H_KV * p.D + p.token_pad, p.D};
  return VarlenStrides{q, kv, kv, q};
}

int64_t varlen_q_numel(const VarlenProblem& p) { return p.total_q() * varlen_strides(p).q.token; }
int64_t varlen_kv_numel(const VarlenProblem& p) { return p.total_k() * varlen_strides(p).k.token; }

AttentionInputs make_varlen_inputs(const VarlenProblem& p, uint64_t seed, double scale) {
  check_varlen_problem(p);
  AttentionInputs in{HostBuffer(p.dtype, varlen_q_numel(p), "Q"),
                     HostBuffer(p.dtype, varlen_kv_numel(p), "K"),
                     HostBuffer(p.dtype, varlen_kv_numel(p), "V")};
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(-scale, scale);
  const VarlenStrides s = varlen_strides(p);
  for (auto [b, heads, st] : {std::tuple{&in.q, p.H, s.q}, {&in.k, p.H_KV, s.k}, {&in.v, p.H_KV, s.v}})
    for (int64_t i = 0; i < b->numel(); ++i)
      b->set(i, i % st.token < heads * p.D ? dist(rng) : std::nan(""));
  return in;
}

std::vector<double> packed_sequence_tensor(const HostBuffer& buf, const PackedStrides& s, int64_t row0,
                                           int64_t n, int64_t heads, int64_t D) {
  std::vector<double> out;
  out.reserve(static_cast<size_t>(heads * n * D));
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t i = 0; i < n; ++i)
      for (int64_t d = 0; d < D; ++d)
        out.push_back(buf.get((row0 + i) * s.token + h * s.head + d));
  return out;
}

AttentionResult varlen_reference(const VarlenProblem& p, const AttentionInputs& in) {
  return varlen_reference(p, in, [](int64_t, const AttentionProblem& sp, const AttentionTensors64& t) {
    // A sequence with rows but no keys: O = 0, LSE = −inf, as initialised.
    return sp.N_K == 0 ? AttentionResult{} : reference_forward(sp, t);
  });
}

AttentionResult varlen_reference(const VarlenProblem& p, const AttentionInputs& in,
                                 const SequenceForwardFn& forward) {
  check_varlen_problem(p);
  const VarlenStrides s = varlen_strides(p);
  const int64_t total_q = p.total_q();
  const std::vector<int32_t> cu_q = p.cu_seqlens_q(), cu_k = p.cu_seqlens_k();
  AttentionResult r;
  r.o.assign(static_cast<size_t>(total_q * p.H * p.D), 0.0);
  r.lse.assign(static_cast<size_t>(p.H * total_q), -kInf);
  for (int64_t b = 0; b < p.batch(); ++b) {
    const AttentionProblem sp = p.sequence(b);
    const int64_t q0 = cu_q[static_cast<size_t>(b)], k0 = cu_k[static_cast<size_t>(b)];
    if (sp.N_Q == 0)
      continue; // no rows
    AttentionTensors64 t{packed_sequence_tensor(in.q, s.q, q0, sp.N_Q, p.H, p.D),
                         packed_sequence_tensor(in.k, s.k, k0, sp.N_K, p.H_KV, p.D),
                         packed_sequence_tensor(in.v, s.v, k0, sp.N_K, p.H_KV, p.D),
                         {}};
    const AttentionResult seq = forward(b, sp, t); // O [1, H, n, D], LSE [1, H, n]; empty: as initialised
    if (seq.lse.empty())
      continue;
    for (int64_t h = 0; h < p.H; ++h)
      for (int64_t i = 0; i < sp.N_Q; ++i) {
        const size_t src = static_cast<size_t>(h * sp.N_Q + i);
        r.lse[static_cast<size_t>(h * total_q + q0 + i)] = seq.lse[src];
        for (int64_t d = 0; d < p.D; ++d)
          r.o[static_cast<size_t>(((q0 + i) * p.H + h) * p.D + d)] =
              seq.o[src * static_cast<size_t>(p.D) + static_cast<size_t>(d)];
      }
  }
  return r;
}

Config default_fa2_varlen_config(const VarlenProblem& p) {
  return varlen_config(default_fa2_config(p.shape()));
}

VarlenSizes varlen_sizes(const VarlenProblem& p) {
  return VarlenSizes{p.batch(),   p.H, p.H_KV,           p.total_q(),
                     p.total_k(), p.D, p.max_seqlen_q(), p.max_seqlen_k()};
}

SizeArgs varlen_size_args(const VarlenSizes& s) {
  return {{"B", s.B},
          {"H", s.H},
          {"H_KV", s.H_KV},
          {"TOTAL_Q", s.total_q},
          {"TOTAL_K", s.total_k},
          {"D", s.D},
          {"MAX_SEQLEN_Q", s.max_seqlen_q},
          {"MAX_SEQLEN_K", s.max_seqlen_k}};
}

SizeArgs varlen_size_args(const VarlenProblem& p) { return varlen_size_args(varlen_sizes(p)); }

AttentionOutputs make_varlen_outputs(const VarlenProblem& p) {
  AttentionOutputs out{HostBuffer(p.dtype, varlen_q_numel(p), "O"),
                       HostBuffer(DType::f32, p.H * p.total_q(), "LSE")};
  poison(out.o);
  poison(out.lse);
  return out;
}

AttentionResult gather_varlen_outputs(const VarlenProblem& p, const AttentionOutputs& out) {
  const PackedStrides s = varlen_strides(p).o;
  AttentionResult r;
  r.o.reserve(static_cast<size_t>(p.total_q() * p.H * p.D));
  for (int64_t t = 0; t < p.total_q(); ++t)
    for (int64_t h = 0; h < p.H; ++h)
      for (int64_t d = 0; d < p.D; ++d)
        r.o.push_back(out.o.get(t * s.token + h * s.head + d));
  r.lse.resize(static_cast<size_t>(out.lse.numel()));
  for (size_t i = 0; i < r.lse.size(); ++i)
    r.lse[i] = out.lse.get(static_cast<int64_t>(i));
  return r;
}

VarlenOffsets varlen_offsets(const VarlenProblem& p) {
  return VarlenOffsets{p.cu_seqlens_q(), p.cu_seqlens_k(), p.max_seqlen_q(), p.max_seqlen_k()};
}

AttentionResult run_fa2_varlen_interpreted(const VarlenProblem& p, const Config& config,
                                           const AttentionInputs& in, Executor executor) {
  return run_fa2_varlen_interpreted(p, config, in, varlen_offsets(p), executor);
}

AttentionResult run_fa2_varlen_interpreted(const VarlenProblem& p, const Config& config,
                                           const AttentionInputs& in, const VarlenOffsets& offsets,
                                           Executor executor) {
  return run_fa2_varlen_interpreted(p, config, in, offsets, executor, AttentionMods{}, {});
}

AttentionResult run_fa2_varlen_interpreted(const VarlenProblem& p, const Config& config,
                                           const AttentionInputs& in, const VarlenOffsets& offsets,
                                           Executor executor, const AttentionMods& mods,
                                           const std::vector<InterpArg>& mod_args) {
  check_varlen_problem(p);
  check_attention_config(p.shape(), config);
  AttentionInputs inputs = in;
  AttentionOutputs out = make_varlen_outputs(p);
  const int64_t B = static_cast<int64_t>(offsets.cu_seqlens_q.size()) - 1;
  if (B > 0 && p.total_q() > 0 && offsets.max_seqlen_q > 0) {
    HostBuffer cu_q(DType::i32, B + 1, "CU_SEQLENS_Q"), cu_k(DType::i32, B + 1, "CU_SEQLENS_K");
    for (int64_t i = 0; i <= B; ++i) {
      cu_q.set_int(i, offsets.cu_seqlens_q[static_cast<size_t>(i)]);
      cu_k.set_int(i, offsets.cu_seqlens_k[static_cast<size_t>(i)]);
    }
    const VarlenStrides s = varlen_strides(p);
    std::vector<InterpArg> args = {InterpArg::ptr(inputs.q), InterpArg::ptr(inputs.k),
                                   InterpArg::ptr(inputs.v), InterpArg::ptr(out.o),
                                   InterpArg::ptr(out.lse),  InterpArg::of_float(p.shape().scale())};
    for (int64_t v : {B, p.H, p.H_KV, p.total_q(), p.total_k(), p.D})
      args.push_back(InterpArg::of_int(v));
    for (const PackedStrides* t : {&s.q, &s.k, &s.v, &s.o})
      for (int64_t v : {int64_t{0}, t->head, t->token}) // (batch: unused, head, sequence)
        args.push_back(InterpArg::of_int(v));
    args.push_back(InterpArg::ptr(cu_q));
    args.push_back(InterpArg::ptr(cu_k));
    args.insert(args.end(), mod_args.begin(), mod_args.end());
    SizeArgs sizes = varlen_size_args(p);
    sizes["B"] = B;
    sizes["MAX_SEQLEN_Q"] = offsets.max_seqlen_q;
    sizes["MAX_SEQLEN_K"] = offsets.max_seqlen_k;
    const KernelDef& def = fa2_fwd_varlen_def(mods);
    execute(executor, def.build(config), def.grid(config, sizes), args);
  }
  return gather_varlen_outputs(p, out);
}

} // namespace kiln
