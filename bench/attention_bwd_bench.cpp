#include "bench/attention_bwd_bench.h"

#include "bench/attention_bench.h"
#include "bench/attention_bwd_reference.h"
#include "bench/launch_args.h"
#include "bench/random_fill.h"

#include "kernels/attention/attention_bwd_args.h"
#include "kernels/attention/attention_bwd_problem.h"
#include "kernels/attention/attention_tolerance.h"
#include "kernels/attention/fa2_bwd_dkdv.h"
#include "kernels/attention/fa2_bwd_dq.h"
#include "kernels/attention/fa2_bwd_dq_convert.h"
#include "kernels/attention/fa2_bwd_preprocess.h"
#include "kernels/attention/fa2_fwd.h"
#include "kernels/compare.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <memory>
#include <optional>
#include <tuple>

namespace kiln::bench {

double attention_bwd_flops(const AttentionProblem& p) { return 2.5 * attention_flops(p); }
double attention_fwd_bwd_flops(const AttentionProblem& p) { return 3.5 * attention_flops(p); }

namespace {

// The sampled check: dQ of 32 rows per query head and dK, dV of 32 keys, in 2 (batch, kv head) pairs up to
// N = 4096 and 1 beyond (the row statistics of a head cost 2·N²·D multiply-adds: 3.4·10¹⁰ at N = 16384, D =
// 64, a few seconds over the CPU's threads, once per shape for the shape's three cases).
constexpr int64_t kRowsPerHead = 32, kKeysPerHead = 32;
int64_t sampled_kv_heads(const AttentionProblem& p) { return p.N_Q <= 4096 ? 2 : 1; }

enum class Variant { Deterministic, AtomicDq, ForwardBackward };

} // namespace

// Everything one shape's cases share: inputs and dO (one upload per dtype: every sweep shape has 2^25
// elements per tensor), the forward's O and LSE from kiln's forward, the gradients' buffers, and the
// sampled reference (computed by the first case that needs it).
struct BwdShapeData {
  DType dtype = DType::f16;
  int64_t q_elems = 0, kv_elems = 0;
  AttentionInputs in;
  HostBuffer dout;
  rt::DeviceBuffer q_dev, k_dev, v_dev, dout_dev, o, lse, delta, dgrad_q, dgrad_k, dgrad_v, dq_acc;

  std::string problem;                // p.str() of the shape O, LSE and the reference are for
  std::optional<Session::Launch> fwd; // kiln's forward for it (the tuner's pick with --tune)
  std::string fwd_config;
  std::vector<LaunchArg> fwd_args;
  std::optional<BwdSample> sample;
  std::optional<SampledGrads> want;
};

class BwdDataCache {
public:
  BwdShapeData& get(Session& s, const AttentionProblem& p) {
    const uint64_t seed = s.options().seed;
    if (!data_ || data_->dtype != p.dtype || data_->q_elems != q_numel(p) || data_->kv_elems != kv_numel(p)) {
      data_.reset(); // free the previous tensors before allocating the next
      data_ = std::make_unique<BwdShapeData>();
      BwdShapeData& d = *data_;
      d.dtype = p.dtype;
      d.q_elems = q_numel(p);
      d.kv_elems = kv_numel(p);
      // The forward suite's inputs (same seeds), and dO uniformly random in [-1, 1].
      d.in = AttentionInputs{HostBuffer(p.dtype, d.q_elems, "Q"), HostBuffer(p.dtype, d.kv_elems, "K"),
                             HostBuffer(p.dtype, d.kv_elems, "V")};
      d.dout = HostBuffer(p.dtype, d.q_elems, "dO");
      fill_uniform(d.in.q, seed, 1.0);
      fill_uniform(d.in.k, seed + 1, 1.0);
      fill_uniform(d.in.v, seed + 2, 1.0);
      fill_uniform(d.dout, seed + 3, 1.0);
      d.q_dev = upload(d.in.q);
      d.k_dev = upload(d.in.k);
      d.v_dev = upload(d.in.v);
      d.dout_dev = upload(d.dout);
      d.o = poisoned_device_buffer(p.dtype, d.q_elems);
      d.dgrad_q = poisoned_device_buffer(p.dtype, d.q_elems);
      d.dgrad_k = poisoned_device_buffer(p.dtype, d.kv_elems);
      d.dgrad_v = poisoned_device_buffer(p.dtype, d.kv_elems);
      d.dq_acc = poisoned_device_buffer(DType::f32, d.q_elems);
    }
    BwdShapeData& d = *data_;
    if (d.problem != p.str()) {
      d.problem = p.str();
      d.fwd.reset();
      d.sample.reset();
      d.want.reset();
      const int64_t rows = p.B * p.H * p.N_Q;
      d.lse = poisoned_device_buffer(DType::f32, rows);
      d.delta = poisoned_device_buffer(DType::f32, rows);
      // kiln's forward, as the attention suite runs it (its output is checked there); O and LSE feed the
      // backward.
      AttentionInputs in{HostBuffer(p.dtype, 0, "Q"), HostBuffer(p.dtype, 0, "K"),
                         HostBuffer(p.dtype, 0, "V")};
      AttentionOutputs out{HostBuffer(p.dtype, 0, "O"), HostBuffer(DType::f32, 0, "LSE")};
      const DeviceMirrors mirrors = {
          {&in.q, &d.q_dev}, {&in.k, &d.k_dev}, {&in.v, &d.v_dev}, {&out.o, &d.o}, {&out.lse, &d.lse}};
      const KernelDef def = fa2_fwd_def();
      const Config config = def.with_overrides(default_fa2_config(p), s.options().fa2_overrides);
      const JitKernel& k = s.kernel(def, config);
      d.fwd_args = to_launch_args(k, fa2_interp_args(p, in, out), mirrors);
      CaseRecord scratch; // the tuner's pick goes into the case's record by the caller
      scratch.flops = attention_flops(p);
      d.fwd =
          s.launch_for(def, config, k, attention_size_args(p), d.fwd_args,
                       {{3, d.o.bytes()}, {4, d.lse.bytes()}}, s.options().fa2_overrides.empty(), scratch);
      d.fwd_config = d.fwd->tuned ? scratch.config : config.str();
      d.fwd->kernel->launch(d.fwd->grid, d.fwd_args);
    }
    return d;
  }

private:
  std::unique_ptr<BwdShapeData> data_;
};

namespace {

// The backward's launches for one variant: the preprocess, dK/dV, then dQ (or the atomic variant's convert).
struct BwdLaunches {
  Session::Launch pre, dkdv, last;
  std::vector<LaunchArg> args;
  std::string config;

  void launch(const rt::Stream& stream) const {
    pre.kernel->launch(pre.grid, args, stream);
    dkdv.kernel->launch(dkdv.grid, args, stream);
    last.kernel->launch(last.grid, args, stream);
  }
};

// `tune`: dK/dV and dQ tuned per shape (--tune-bwd); else at default_bwd_configs, generated with `codegen`.
BwdLaunches bwd_launches(Session& s, const AttentionProblem& p, bool atomic, BwdShapeData& d, CaseRecord& r,
                         const CodegenOptions& codegen, bool tune) {
  // Host stand-ins only name the buffers for the argument list; the kernels use the device buffers.
  AttentionBwdBuffers b;
  for (HostBuffer* h : {&b.q, &b.k, &b.v, &b.o, &b.dout, &b.dq, &b.dk, &b.dv})
    *h = HostBuffer(p.dtype, 0, "T");
  for (HostBuffer* h : {&b.lse, &b.delta, &b.dq_acc})
    *h = HostBuffer(DType::f32, 0, "F");
  const DeviceMirrors mirrors = {{&b.q, &d.q_dev},     {&b.k, &d.k_dev},       {&b.v, &d.v_dev},
                                 {&b.o, &d.o},         {&b.dout, &d.dout_dev}, {&b.lse, &d.lse},
                                 {&b.delta, &d.delta}, {&b.dq, &d.dgrad_q},    {&b.dk, &d.dgrad_k},
                                 {&b.dv, &d.dgrad_v},  {&b.dq_acc, &d.dq_acc}};
  const AttentionBwdConfigs configs = default_bwd_configs(p, atomic);
  const Config pre = bwd_preprocess_config(p, configs.dkdv);
  const SizeArgs sizes = attention_size_args(p);
  BwdLaunches l;
  const JitKernel& kpre = s.kernel(fa2_bwd_preprocess_def(), pre, codegen);
  l.args = to_launch_args(kpre, fa2_bwd_interp_args(p, b), mirrors);
  l.pre = s.launch_for(fa2_bwd_preprocess_def(), pre, kpre, sizes, l.args, {}, false, r);
  // Delta (and the zeroed accumulator) before dK/dV is tuned or run.
  l.pre.kernel->launch(l.pre.grid, l.args);
  std::vector<OutputArg> dkdv_out = {{kBwdArgDk, d.dgrad_k.bytes()}, {kBwdArgDv, d.dgrad_v.bytes()}};
  if (atomic)
    dkdv_out.push_back({kBwdArgDqAcc, d.dq_acc.bytes()});
  CaseRecord tuned; // launch_for writes the picked config here; the case's record gets all of them
  tuned.flops = r.flops;
  l.dkdv = s.launch_for(fa2_bwd_dkdv_def(), configs.dkdv, s.kernel(fa2_bwd_dkdv_def(), configs.dkdv, codegen), sizes,
                        l.args, dkdv_out, tune, tuned, codegen);
  const std::string dkdv_config = tune ? tuned.config : configs.dkdv.str();
  if (atomic) {
    const Config conv = bwd_dq_convert_config(p);
    l.last = s.launch_for(fa2_bwd_dq_convert_def(), conv, s.kernel(fa2_bwd_dq_convert_def(), conv, codegen), sizes,
                          l.args, {}, false, tuned);
    l.config = "dkdv: " + dkdv_config + " | dq: atomic in dkdv, then convert";
  } else {
    l.last = s.launch_for(fa2_bwd_dq_def(), configs.dq, s.kernel(fa2_bwd_dq_def(), configs.dq, codegen), sizes, l.args,
                          {{kBwdArgDq, d.dgrad_q.bytes()}}, tune, tuned, codegen);
    l.config = "dkdv: " + dkdv_config + " | dq: " + (tune ? tuned.config : configs.dq.str());
  }
  return l;
}

// dQ, dK, dV as they are on the device against the sampled reference (computed once per shape).
CheckResult check_grads(Session& s, const AttentionProblem& p, BwdShapeData& d, CaseRecord& r) {
  if (!d.want) {
    const auto start = std::chrono::steady_clock::now();
    d.sample = sample_bwd(p, sampled_kv_heads(p), kRowsPerHead, kKeysPerHead, s.options().seed ^ 0xB4C4);
    d.want = sampled_reference_backward(p, d.in, d.dout, *d.sample);
    r.extra["reference_seconds"] =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  const SampledGrads got = gather_sampled_grads(p, download(d.dgrad_q, p.dtype, d.q_elems, "dQ"),
                                                download(d.dgrad_k, p.dtype, d.kv_elems, "dK"),
                                                download(d.dgrad_v, p.dtype, d.kv_elems, "dV"), *d.sample);
  // The kernels' gradient tolerance, as the tests and `kiln attention --backward --check` hold them to.
  CheckResult c;
  c.method = "sampled";
  c.tolerance = attention_grad_tolerance(p.dtype, p.tf32, d.want->max_abs_lse);
  c.error = 0;
  c.ok = true;
  for (auto [name, g, w] : {std::tuple{"dq_error", &got.dq, &d.want->dq},
                            {"dk_error", &got.dk, &d.want->dk},
                            {"dv_error", &got.dv, &d.want->dv}}) {
    const Comparison cmp = compare_to_reference(*g, *w);
    r.extra[name] = number_or_null(cmp.relative_error);
    c.elements += static_cast<int64_t>(g->size());
    c.error = std::max(c.error, cmp.relative_error);
    c.nonfinite_mismatches += cmp.nonfinite_mismatches;
    c.ok = c.ok && cmp.ok(c.tolerance);
  }
  r.extra["sampled_rows"] = static_cast<int64_t>(d.sample->rows.size());
  r.extra["sampled_keys"] = static_cast<int64_t>(d.sample->keys.size());
  return c;
}

void run_bwd_case(Session& s, CaseRecord& r, const AttentionProblem& p, Variant variant, BwdDataCache& cache,
                  const CodegenOptions& codegen, bool tune) {
  BwdShapeData& d = cache.get(s, p);
  const BwdLaunches l = bwd_launches(s, p, variant == Variant::AtomicDq, d, r, codegen, tune);
  r.config = variant == Variant::ForwardBackward ? "fwd: " + d.fwd_config + " | " + l.config : l.config;
  // Once on NaN-poisoned gradients (and, for the step, O and LSE), checked, then timed.
  for (rt::DeviceBuffer* b : {&d.dgrad_q, &d.dgrad_k, &d.dgrad_v, &d.delta, &d.dq_acc})
    b->fill_bytes(0xFF);
  const auto step = [&](const rt::Stream& stream) {
    if (variant == Variant::ForwardBackward)
      d.fwd->kernel->launch(d.fwd->grid, d.fwd_args, stream);
    l.launch(stream);
  };
  if (variant == Variant::ForwardBackward) {
    d.o.fill_bytes(0xFF);
    d.lse.fill_bytes(0xFF);
  }
  step(rt::Stream());
  r.check = check_grads(s, p, d, r);
  if (!r.check.ok)
    return;
  s.time(
      r, [&](rt::Stream& stream) { step(stream); }, /*flush_l2=*/false);
}

// `codegen`: all switches on, or the one --switch-off names off.
BenchCase bwd_case(const AttentionProblem& p, Variant variant, const std::shared_ptr<BwdDataCache>& cache,
                   const CodegenOptions& codegen) {
  static const char* const systems[] = {"kiln_fa2_bwd", "kiln_fa2_bwd_atomic", "kiln_fa2"};
  static const char* const notes[] = {"deterministic", "ATOMIC_DQ=1", "forward + deterministic backward"};
  const int v = static_cast<int>(variant);
  BenchCase c;
  c.record = case_record("attention_bwd",
                         variant == Variant::ForwardBackward ? "attention_fwd_bwd" : "attention_bwd",
                         systems[v], notes[v], p.dtype, {{"B", p.B}, {"H", p.H}, {"N", p.N_Q}, {"D", p.D}},
                         p.causal, codegen);
  c.record.flops = variant == Variant::ForwardBackward ? attention_fwd_bwd_flops(p) : attention_bwd_flops(p);
  const AttentionBwdConfigs configs = default_bwd_configs(p, variant == Variant::AtomicDq);
  c.def = fa2_bwd_dkdv_def();
  c.config = configs.dkdv;
  c.codegen = codegen;
  c.more_kernels = {{fa2_bwd_preprocess_def(), bwd_preprocess_config(p, configs.dkdv)},
                    {variant == Variant::AtomicDq ? fa2_bwd_dq_convert_def() : fa2_bwd_dq_def(),
                     variant == Variant::AtomicDq ? bwd_dq_convert_config(p) : configs.dq},
                    {fa2_fwd_def(), default_fa2_config(p)}};
  c.run = [p, variant, cache, codegen](Session& s, const JitKernel&, CaseRecord& rec) {
    run_bwd_case(s, rec, p, variant, *cache, codegen, s.options().tune_bwd);
  };
  return c;
}

} // namespace

std::shared_ptr<BwdDataCache> make_attention_bwd_data_cache() { return std::make_shared<BwdDataCache>(); }

BenchCase attention_bwd_ablation_case(const AttentionProblem& p, const std::string& system, const std::string& note,
                                      const CodegenOptions& codegen, const std::shared_ptr<BwdDataCache>& cache) {
  BenchCase c;
  c.record = case_record("ablation", "attention_bwd", system, note, p.dtype,
                         {{"B", p.B}, {"H", p.H}, {"N", p.N_Q}, {"D", p.D}}, p.causal, codegen);
  c.record.flops = attention_bwd_flops(p);
  const AttentionBwdConfigs configs = default_bwd_configs(p);
  c.def = fa2_bwd_dkdv_def();
  c.config = configs.dkdv;
  c.codegen = codegen;
  c.more_kernels = {{fa2_bwd_preprocess_def(), bwd_preprocess_config(p, configs.dkdv)},
                    {fa2_bwd_dq_def(), configs.dq}};
  c.run = [p, codegen, cache](Session& s, const JitKernel&, CaseRecord& rec) {
    run_bwd_case(s, rec, p, Variant::Deterministic, *cache, codegen, /*tune=*/false);
  };
  return c;
}

std::vector<BenchCase> attention_bwd_cases(const BenchOptions& options) {
  auto cache = make_attention_bwd_data_cache();
  std::vector<BenchCase> cases;
  const bool q = options.quick;
  // Ordered as the forward suite: dtype-major (one upload per dtype), then D and causal (one set of
  // compiled kernels for all N); per shape the three variants share the inputs, the forward's O and LSE
  // and the sampled reference.
  for (DType dtype : {DType::f16, DType::bf16}) {
    if (q && dtype == DType::bf16)
      continue;
    for (int64_t D : {64, 128})
      for (int causal : {0, 1})
        for (int64_t N : {1024, 2048, 4096, 8192, 16384}) {
          if (q && (N == 2048 || N == 8192 || N == 16384 || (D == 128 && causal)))
            continue;
          const AttentionProblem p = sweep_problem(dtype, N, D, causal);
          for (Variant v : {Variant::Deterministic, Variant::AtomicDq, Variant::ForwardBackward})
            cases.push_back(bwd_case(p, v, cache, options.sweep_codegen));
        }
  }
  return cases;
}

} // namespace kiln::bench
