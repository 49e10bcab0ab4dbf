#include "kernels/attention/attention_bwd_problem.h"

#include "kernels/attention/attention_bwd_space.h"
#include "kernels/attention/fa2_bwd_dkdv.h"
#include "kernels/attention/fa2_bwd_dq.h"
#include "kernels/attention/fa2_bwd_dq_convert.h"
#include "kernels/attention/fa2_bwd_preprocess.h"
#include "support/parallel_chunks.h"

#include <cmath>
#include <limits>
#include <random>

namespace kiln {

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();
}

HostBuffer make_dout(const AttentionProblem& p, uint64_t seed, double scale) {
  check_attention_problem(p);
  HostBuffer dout(p.dtype, q_numel(p), "dO");
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> dist(-scale, scale);
  for (int64_t i = 0; i < dout.numel(); ++i)
    dout.set(i, dist(rng));
  return dout;
}

AttentionTensors64 logical_bwd_tensors(const AttentionProblem& p, const AttentionInputs& in, const HostBuffer& dout) {
  AttentionTensors64 t = logical_tensors(p, in);
  t.dout = logical_tensor(dout, attention_strides(p).q, p.B, p.H, p.N_Q, p.D);
  return t;
}

AttentionGrads reference_backward(const AttentionProblem& p, const AttentionTensors64& t) {
  return reference_backward(p, t, ReferenceBackwardScores{});
}

AttentionGrads reference_backward(const AttentionProblem& p, const AttentionTensors64& t,
                                  const ReferenceBackwardScores& scores) {
  const std::vector<double> lse = scores.lse.empty() ? reference_forward(p, t, scores.score).lse : scores.lse;
  const double scale = p.scale();
  const size_t D = static_cast<size_t>(p.D), NK = static_cast<size_t>(p.N_K);
  AttentionGrads g;
  g.dq.assign(t.q.size(), 0.0);
  g.dk.assign(t.k.size(), 0.0);
  g.dv.assign(t.v.size(), 0.0);
  g.dq_magnitude.assign(t.q.size(), 0.0);
  g.dk_magnitude.assign(t.k.size(), 0.0);
  g.dv_magnitude.assign(t.v.size(), 0.0);
  const int64_t group = p.H / p.H_KV;
  // A score function (a mod's reference, which may keep state) runs on one thread; else rows and keys in parallel.
  const int64_t threads = scores.score || scores.derivative ? 1 : 0;
  // The terms of row i of (b, h) and key j, computed alike by both passes below, so that they agree bit for bit:
  // P_ij (0 where the pair is hidden), dP_ij = dO_i · V_j, the sum of its terms' magnitudes, and d score / d s.
  struct Pair {
    double prob = 0, dp = 0, dp_abs = 0, slope = 1;
  };
  auto pair = [&](int64_t b, int64_t h, int64_t i, int64_t j) {
    Pair r;
    if (!visible(p, i, j))
      return r;
    const size_t row = static_cast<size_t>((b * p.H + h) * p.N_Q + i);
    const size_t kv = static_cast<size_t>((b * p.H_KV + h / group) * p.N_K + j) * D;
    const double* q = &t.q[row * D];
    const double* dout = &t.dout[row * D];
    double s = 0;
    for (size_t d = 0; d < D; ++d) {
      s += q[d] * t.k[kv + d];
      r.dp += dout[d] * t.v[kv + d];
      r.dp_abs += std::abs(dout[d] * t.v[kv + d]);
    }
    const double scaled = s * scale;
    const double modded = scores.score ? scores.score(b, h, i, j, scaled) : scaled;
    if (modded == -kInf)
      return Pair{}; // hidden by a mask mod
    r.prob = std::exp(modded - lse[row]);
    // d score / d (q·k · scale): dS through the score mods
    r.slope = scores.derivative ? scores.derivative(b, h, i, j, scaled) : 1.0;
    return r;
  };
  // dL/dS_ij · scale = dL/d(q·k), and the same over the terms' magnitudes.
  auto ds_of = [&](const Pair& x, double delta) { return x.prob * (x.dp - delta) * x.slope * scale; };
  auto ds_abs_of = [&](const Pair& x, double delta_abs) {
    return x.prob * (x.dp_abs + delta_abs) * std::abs(x.slope * scale);
  };
  // Rows: Delta_i = rowsum(P ∘ dP) (which equals rowsum(dO ∘ O)) and over |dP|'s terms, then dQ_i.
  const int64_t rows = p.B * p.H * p.N_Q;
  std::vector<double> delta(static_cast<size_t>(rows), 0.0), delta_abs(static_cast<size_t>(rows), 0.0);
  parallel_chunks(rows, [&](int64_t begin, int64_t end) {
    std::vector<Pair> terms(NK);
    for (int64_t row_index = begin; row_index < end; ++row_index) {
      const size_t row = static_cast<size_t>(row_index);
      if (lse[row] == -kInf)
        continue; // no visible key: P = 0, nothing flows back
      const int64_t i = row_index % p.N_Q, h = row_index / p.N_Q % p.H, b = row_index / (p.N_Q * p.H);
      const size_t kv0 = static_cast<size_t>((b * p.H_KV + h / group) * p.N_K) * D;
      for (size_t j = 0; j < NK; ++j) {
        terms[j] = pair(b, h, i, static_cast<int64_t>(j));
        delta[row] += terms[j].prob * terms[j].dp;
        delta_abs[row] += terms[j].prob * terms[j].dp_abs;
      }
      for (size_t j = 0; j < NK; ++j) {
        if (terms[j].prob == 0)
          continue;
        const double ds = ds_of(terms[j], delta[row]), ds_abs = ds_abs_of(terms[j], delta_abs[row]);
        for (size_t d = 0; d < D; ++d) {
          const size_t kd = kv0 + j * D + d;
          g.dq[row * D + d] += ds * t.k[kd];
          g.dq_magnitude[row * D + d] += ds_abs * std::abs(t.k[kd]);
        }
      }
    }
  }, threads);
  // Keys: dK_j and dV_j over the rows of every query head of j's kv head, in the order (h, i).
  parallel_chunks(p.B * p.H_KV * p.N_K, [&](int64_t begin, int64_t end) {
    for (int64_t key = begin; key < end; ++key) {
      const int64_t j = key % p.N_K, hk = key / p.N_K % p.H_KV, b = key / (p.N_K * p.H_KV);
      const size_t kv = static_cast<size_t>(key) * D;
      for (int64_t h = hk * group; h < (hk + 1) * group; ++h)
        for (int64_t i = 0; i < p.N_Q; ++i) {
          const size_t row = static_cast<size_t>((b * p.H + h) * p.N_Q + i);
          if (lse[row] == -kInf)
            continue;
          const Pair x = pair(b, h, i, j);
          if (x.prob == 0)
            continue;
          const double ds = ds_of(x, delta[row]), ds_abs = ds_abs_of(x, delta_abs[row]);
          const double* q = &t.q[row * D];
          const double* dout = &t.dout[row * D];
          for (size_t d = 0; d < D; ++d) {
            g.dk[kv + d] += ds * q[d];
            g.dv[kv + d] += x.prob * dout[d];
            g.dk_magnitude[kv + d] += ds_abs * std::abs(q[d]);
            g.dv_magnitude[kv + d] += x.prob * std::abs(dout[d]);
          }
        }
    }
  }, threads);
  return g;
}

std::array<GradComparison, 3> compare_grads(const AttentionGrads& out, const AttentionGrads& ref) {
  return {GradComparison{"dQ", compare_to_reference(out.dq, ref.dq, ref.dq_magnitude)},
          GradComparison{"dK", compare_to_reference(out.dk, ref.dk, ref.dk_magnitude)},
          GradComparison{"dV", compare_to_reference(out.dv, ref.dv, ref.dv_magnitude)}};
}

AttentionBwdBuffers make_bwd_buffers(const AttentionProblem& p, const AttentionInputs& in, const HostBuffer& dout) {
  check_attention_problem(p);
  const int64_t rows = p.B * p.H * p.N_Q;
  AttentionBwdBuffers b{in.q,
                        in.k,
                        in.v,
                        HostBuffer(p.dtype, q_numel(p), "O"),
                        dout,
                        HostBuffer(DType::f32, rows, "LSE"),
                        HostBuffer(DType::f32, rows, "Delta"),
                        HostBuffer(p.dtype, q_numel(p), "dQ"),
                        HostBuffer(p.dtype, kv_numel(p), "dK"),
                        HostBuffer(p.dtype, kv_numel(p), "dV"),
                        HostBuffer(DType::f32, rows * p.D, "DQ_ACC")};
  // The forward's outputs as the forward kernel would leave them.
  set_forward_outputs(p, reference_forward(p, logical_tensors(p, in)), b);
  for (HostBuffer* out : {&b.delta, &b.dq, &b.dk, &b.dv, &b.dq_acc})
    poison(*out);
  return b;
}

void set_forward_outputs(const AttentionProblem& p, const AttentionResult& fwd, AttentionBwdBuffers& b) {
  const AttentionStrides s = attention_strides(p);
  size_t n = 0;
  for (int64_t bi = 0; bi < p.B; ++bi)
    for (int64_t h = 0; h < p.H; ++h)
      for (int64_t i = 0; i < p.N_Q; ++i)
        for (int64_t d = 0; d < p.D; ++d)
          b.o.set(element_offset(s.o, bi, h, i, d), fwd.o[n++]);
  for (int64_t r = 0; r < b.lse.numel(); ++r)
    b.lse.set(r, fwd.lse[static_cast<size_t>(r)]);
}

std::vector<InterpArg> fa2_bwd_interp_args(const AttentionProblem& p, AttentionBwdBuffers& b) {
  const AttentionStrides s = attention_strides(p);
  std::vector<InterpArg> args;
  for (HostBuffer* t : {&b.q, &b.k, &b.v, &b.o, &b.dout, &b.lse, &b.delta, &b.dq, &b.dk, &b.dv, &b.dq_acc})
    args.push_back(InterpArg::ptr(*t));
  args.push_back(InterpArg::of_float(p.scale()));
  for (int64_t v : {p.B, p.H, p.H_KV, p.N_Q, p.N_K, p.D})
    args.push_back(InterpArg::of_int(v));
  // Q, K, V, O, dO, dQ, dK, dV: gradients share their input's layout.
  for (const TensorStrides* t : {&s.q, &s.k, &s.v, &s.o, &s.q, &s.q, &s.k, &s.k})
    for (int64_t v : {t->b, t->h, t->n})
      args.push_back(InterpArg::of_int(v));
  return args;
}

AttentionGrads gather_grads(const AttentionProblem& p, const AttentionBwdBuffers& b) {
  const AttentionStrides s = attention_strides(p);
  AttentionGrads g;
  g.dq = logical_tensor(b.dq, s.q, p.B, p.H, p.N_Q, p.D);
  g.dk = logical_tensor(b.dk, s.k, p.B, p.H_KV, p.N_K, p.D);
  g.dv = logical_tensor(b.dv, s.k, p.B, p.H_KV, p.N_K, p.D);
  return g;
}

AttentionBwdConfigs default_bwd_configs(const AttentionProblem& p, bool atomic_dq) {
  const int64_t hd = p.head_dim_tile();
  const bool wide = hd > 128 || p.dtype == DType::f32; // halve the streamed tiles to keep shared memory small
  const bool widest = hd > 128 && p.dtype == DType::f32; // 4-byte rows of 256: halve the resident tiles too
  AttentionBwdConfigs c{with_attention_problem(fa2_bwd_dkdv_def().default_config(), p),
                        with_attention_problem(fa2_bwd_dq_def().default_config(), p)};
  // dK/dV: 64 keys a program (their dK and dV accumulators stay in registers), 64 query rows a step up to
  // D = 64; 32 beyond, where 64 spills on sm_80 (and a little on sm_90a, where the tuner may still pick it:
  // it measured faster on an H100, docs/worklog.md §15). The atomic variant keeps 64-row steps (its dQ product
  // has BLOCK_M rows).
  const bool short_steps = (hd > 64 || p.dtype == DType::f32) && !atomic_dq;
  c.dkdv.set("BLOCK_N", widest ? 32 : 64).set("BLOCK_M", short_steps || widest ? 32 : 64);
  c.dkdv.set("ATOMIC_DQ", atomic_dq ? 1 : 0);
  // Past 192 columns (D > 192: one 256-wide tile), dK and dV of 64 keys are 2 × 64 × 256 f32: over 4 warps they
  // spilled 3.6 KB a thread (sm_90a) and ran at 92 TFLOP/s on the H200, over 8 none, at 163 (worklog §66). At
  // D = 192 (two tiles, 192 columns) 4 warps measured faster (252 against 146). The atomic variant's default
  // stays at 4 warps; the tuner times its 8-warp tiles, whose dQ product takes a warp split of its own (§79).
  c.dkdv.num_warps = widest ? 2 : p.head_dim_columns() > 192 && p.dtype != DType::f32 && !atomic_dq ? 8 : 4;
  c.dkdv.num_stages = widest ? 1 : 2;
  // dQ: 64 query rows a program, 64 keys a step.
  c.dq.set("BLOCK_M", widest ? 32 : 64).set("BLOCK_N", wide ? 32 : 64);
  c.dq.num_warps = widest ? 2 : 4;
  c.dq.num_stages = widest ? 1 : 2;
  return c;
}

std::vector<Config> bwd_dkdv_config_space(const AttentionProblem& p, bool atomic_dq) {
  std::vector<Config> cs;
  for (Config c : fa2_bwd_dkdv_def().config_space()) {
    c.set("ATOMIC_DQ", atomic_dq ? 1 : 0);
    if (why_not_warp_specialized_dkdv(c, p.H, p.H_KV).empty()) // the warp-specialised tile serves H == H_KV only
      cs.push_back(with_attention_problem(c, p));
  }
  return cs;
}

std::vector<Config> bwd_dq_config_space(const AttentionProblem& p) {
  std::vector<Config> cs;
  for (const Config& c : fa2_bwd_dq_def().config_space())
    cs.push_back(with_attention_problem(c, p));
  return cs;
}

Config bwd_preprocess_config(const AttentionProblem& p, const Config& dkdv) {
  Config c = with_attention_problem(fa2_bwd_preprocess_def().default_config(), p);
  c.set("BLOCK_M", 64).set("ATOMIC_DQ", dkdv.get("ATOMIC_DQ"));
  return c;
}

Config bwd_dq_convert_config(const AttentionProblem& p) {
  return with_attention_problem(fa2_bwd_dq_convert_def().default_config(), p).set("BLOCK_M", 64);
}

void run_bwd(const AttentionProblem& p, const AttentionBwdConfigs& configs, AttentionBwdBuffers& b,
             Executor executor) {
  run_bwd(p, configs, b, executor, AttentionMods{}, {});
}

namespace {

// The preprocess, then dK/dV and dQ (`kernels`, after the backward's arguments their own), or with ATOMIC_DQ=1
// dK/dV and the dQ convert.
void run_bwd_steps(const AttentionProblem& p, const AttentionBwdConfigs& configs, AttentionBwdBuffers& b,
                   Executor executor, const BwdLoopKernels& kernels) {
  check_attention_problem(p);
  check_attention_config(p, configs.dkdv);
  check_attention_config(p, configs.dq);
  const SizeArgs sizes = attention_size_args(p);
  const std::vector<InterpArg> args = fa2_bwd_interp_args(p, b);
  auto with = [&](const std::vector<InterpArg>& extra) { // the looping kernels' arguments end in their own
    std::vector<InterpArg> all = args;
    all.insert(all.end(), extra.begin(), extra.end());
    return all;
  };
  const bool atomic_dq = configs.dkdv.get("ATOMIC_DQ") != 0;
  const Config pre = bwd_preprocess_config(p, configs.dkdv);
  execute(executor, build_fa2_bwd_preprocess(pre), fa2_bwd_preprocess_def().grid(pre, sizes), args);
  const KernelDef& dkdv = *kernels.dkdv;
  execute(executor, dkdv.build(configs.dkdv), dkdv.grid(configs.dkdv, sizes), with(kernels.dkdv_args));
  if (atomic_dq) {
    const Config conv = bwd_dq_convert_config(p);
    execute(executor, build_fa2_bwd_dq_convert(conv), fa2_bwd_dq_convert_def().grid(conv, sizes), args);
  } else {
    const KernelDef& dq = *kernels.dq;
    execute(executor, dq.build(configs.dq), dq.grid(configs.dq, sizes), with(kernels.dq_args));
  }
}

} // namespace

void run_bwd(const AttentionProblem& p, const AttentionBwdConfigs& configs, AttentionBwdBuffers& b,
             Executor executor, const AttentionMods& mods, const std::vector<InterpArg>& mod_args) {
  run_bwd_steps(p, configs, b, executor,
                BwdLoopKernels{&fa2_bwd_dkdv_def(mods), &fa2_bwd_dq_def(mods), mod_args, mod_args});
}

void run_bwd(const AttentionProblem& p, const AttentionBwdConfigs& configs, AttentionBwdBuffers& b,
             Executor executor, const BwdLoopKernels& kernels) {
  if (configs.dkdv.get_or("ATOMIC_DQ", 0) != 0)
    fail("run_bwd with given looping kernels: ATOMIC_DQ=1 in the dK/dV config ({}); expected 0 (dQ runs as "
         "its own kernel)",
         configs.dkdv.str());
  run_bwd_steps(p, configs, b, executor, kernels);
}

} // namespace kiln
