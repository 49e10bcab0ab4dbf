#include "bench/attention_bench.h"

#include "bench/attention_sampled_reference.h"
#include "bench/launch_args.h"
#include "bench/random_fill.h"

#include "kernels/attention/fa1_fwd.h"
#include "kernels/attention/fa2_fwd.h"
#include "kernels/compare.h"

#include <memory>
#include <optional>

namespace kiln::bench {

// Every sweep shape has B·N·H·D = 2^25 elements per tensor, so one upload serves the whole dtype.
struct AttentionData {
  DType dtype = DType::f16;
  int64_t q_elems = 0, kv_elems = 0;
  AttentionInputs host;
  rt::DeviceBuffer q, k, v;
};

class AttentionDataCache {
public:
  AttentionData& get(const AttentionProblem& p, uint64_t seed) {
    if (data_ && data_->dtype == p.dtype && data_->q_elems == q_numel(p) && data_->kv_elems == kv_numel(p))
      return *data_;
    data_.reset(); // free the previous tensors before allocating the next
    data_.emplace();
    AttentionData& d = *data_;
    d.dtype = p.dtype;
    d.q_elems = q_numel(p);
    d.kv_elems = kv_numel(p);
    d.host = AttentionInputs{HostBuffer(p.dtype, d.q_elems, "Q"), HostBuffer(p.dtype, d.kv_elems, "K"),
                             HostBuffer(p.dtype, d.kv_elems, "V")};
    fill_uniform(d.host.q, seed, 1.0);
    fill_uniform(d.host.k, seed + 1, 1.0);
    fill_uniform(d.host.v, seed + 2, 1.0);
    d.q = upload(d.host.q);
    d.k = upload(d.host.k);
    d.v = upload(d.host.v);
    return d;
  }

private:
  std::optional<AttentionData> data_;
};

std::shared_ptr<AttentionDataCache> make_attention_data_cache() {
  return std::make_shared<AttentionDataCache>();
}

namespace {

// Up to this many multiply-adds (B·H·N_Q·N_K·D) the whole output is checked against reference();
// beyond it, a sample of rows (the sweep's shapes are 2^37 each, hours of double-precision CPU time).
constexpr int64_t kFullReferenceMacs = int64_t{1} << 28;
constexpr int64_t kSampledRows = 64;

// Holds the kernel's output against the reference: the whole output for small problems, sampled rows
// otherwise. O and LSE must both be within the dtype's tolerance, with no NaN anywhere checked.
CheckResult check_attention(const AttentionProblem& p, const AttentionInputs& in, const rt::DeviceBuffer& o,
                            const rt::DeviceBuffer& lse, uint64_t seed) {
  HostBuffer o_host = download(o, p.dtype, q_numel(p), "O");
  HostBuffer lse_host = download(lse, DType::f32, p.B * p.H * p.N_Q, "LSE");
  AttentionResult got, want;
  CheckResult c;
  if (p.B * p.H * p.N_Q * p.N_K * p.D <= kFullReferenceMacs) {
    c.method = "full";
    got = gather_outputs(p, AttentionOutputs{std::move(o_host), std::move(lse_host)});
    want = reference(p, in);
  } else {
    c.method = "sampled";
    std::vector<QueryRow> rows = sample_query_rows(p, kSampledRows, seed);
    got = gather_rows(p, o_host, lse_host, rows);
    want = sampled_reference(p, in, rows);
  }
  Comparison co = compare_to_reference(got.o, want.o), cl = compare_to_reference(got.lse, want.lse);
  c.elements = static_cast<int64_t>(got.o.size());
  c.error = co.relative_error;
  c.lse_error = cl.relative_error;
  c.tolerance = tolerance(p.dtype, p.tf32);
  c.nonfinite_mismatches = co.nonfinite_mismatches + cl.nonfinite_mismatches;
  c.ok = co.ok(c.tolerance) && cl.ok(c.tolerance);
  return c;
}

void run_attention(Session& s, const JitKernel& k, CaseRecord& r, const AttentionProblem& p,
                   const Config& config, bool fa1, bool tunable, AttentionDataCache& cache,
                   const CodegenOptions& codegen) {
  check_attention_config(p, config);
  AttentionData& data = cache.get(p, s.options().seed);
  rt::DeviceBuffer o = poisoned_device_buffer(p.dtype, q_numel(p));
  rt::DeviceBuffer lse = poisoned_device_buffer(DType::f32, p.B * p.H * p.N_Q);
  // Host stand-ins only name the outputs for the argument list; the kernel writes the device buffers.
  AttentionOutputs out{HostBuffer(p.dtype, 0, "O"), HostBuffer(DType::f32, 0, "LSE")};
  Fa1Scratch scratch{HostBuffer(DType::f32, 0, "OACC"), HostBuffer(DType::f32, 0, "L"),
                     HostBuffer(DType::f32, 0, "M")};
  DeviceMirrors mirrors = {{&data.host.q, &data.q},
                           {&data.host.k, &data.k},
                           {&data.host.v, &data.v},
                           {&out.o, &o},
                           {&out.lse, &lse}};
  std::vector<InterpArg> interp_args;
  rt::DeviceBuffer oacc, l, m;
  if (fa1) {
    const int64_t rows = p.B * p.H * p.N_Q;
    oacc = poisoned_device_buffer(DType::f32, rows * p.head_dim_tile());
    l = poisoned_device_buffer(DType::f32, rows);
    m = poisoned_device_buffer(DType::f32, rows);
    mirrors.insert(mirrors.end(), {{&scratch.oacc, &oacc}, {&scratch.l, &l}, {&scratch.m, &m}});
    interp_args = fa1_interp_args(p, data.host, out, scratch);
  } else {
    interp_args = fa2_interp_args(p, data.host, out);
  }
  const std::vector<LaunchArg> args = to_launch_args(k, interp_args, mirrors);
  const KernelDef def = fa1 ? fa1_fwd_def() : fa2_fwd_def();
  // FA1 runs its one config; FA2 the tuner's pick for the shape (with --tune and no --config).
  const Session::Launch run =
      s.launch_for(def, config, k, attention_size_args(p), args, {{3, o.bytes()}, {4, lse.bytes()}},
                   tunable && !fa1 && s.options().fa2_overrides.empty(), r, codegen);

  run.kernel->launch(run.grid, args);
  r.check = check_attention(p, data.host, o, lse, s.options().seed ^ 0x5A5A);
  if (!r.check.ok)
    return;
  s.time(
      r, [&](rt::Stream& stream) { run.kernel->launch(run.grid, args, stream); }, /*flush_l2=*/false);
}

} // namespace

AttentionProblem sweep_problem(DType dtype, int64_t N, int64_t D, int causal) {
  AttentionProblem p;
  p.B = 16384 / N;
  p.H = p.H_KV = 2048 / D;
  p.N_Q = p.N_K = N;
  p.D = D;
  p.dtype = dtype;
  p.causal = causal;
  return p;
}

AttentionProblem single_problem(DType dtype, int64_t B, int64_t H, int64_t N, int64_t D, int causal) {
  AttentionProblem p;
  p.B = B;
  p.H = p.H_KV = H;
  p.N_Q = p.N_K = N;
  p.D = D;
  p.dtype = dtype;
  p.causal = causal;
  return p;
}

BenchCase attention_case(const AttentionCaseSpec& spec, const BenchOptions& options,
                         const std::shared_ptr<AttentionDataCache>& cache) {
  const AttentionProblem& p = spec.problem;
  BenchCase c;
  c.record = case_record(spec.suite, "attention", spec.system, spec.note, p.dtype,
                         {{"B", p.B}, {"H", p.H}, {"N", p.N_Q}, {"D", p.D}}, p.causal, spec.codegen);
  c.record.flops = attention_flops(p);
  c.codegen = spec.codegen;
  if (spec.fa1) {
    c.def = fa1_fwd_def();
    c.config = spec.config ? *spec.config : default_fa1_config(p);
  } else {
    c.def = fa2_fwd_def();
    c.config =
        spec.config ? *spec.config : c.def.with_overrides(default_fa2_config(p), options.fa2_overrides);
  }
  c.run = [p, fa1 = spec.fa1, tunable = spec.tunable, cache, config = c.config,
           codegen = spec.codegen](Session& s, const JitKernel& k, CaseRecord& rec) {
    run_attention(s, k, rec, p, config, fa1, tunable, *cache, codegen);
  };
  return c;
}

namespace {

// The sweep's and the seeds' cases: default configs (or the tuner's pick with --tune), all switches on but the
// one --switch-off names.
BenchCase attention_case(const std::string& suite, const std::string& system, const std::string& note,
                         const AttentionProblem& p, bool fa1, const BenchOptions& options,
                         const std::shared_ptr<AttentionDataCache>& cache) {
  AttentionCaseSpec spec;
  spec.suite = suite;
  spec.system = system;
  spec.note = note;
  spec.problem = p;
  spec.fa1 = fa1;
  spec.codegen = options.sweep_codegen;
  return attention_case(spec, options, cache);
}

} // namespace

std::vector<BenchCase> attention_cases(const BenchOptions& options) {
  auto cache = make_attention_data_cache();
  std::vector<BenchCase> cases;
  const bool q = options.quick;
  // Ordered dtype-major so that one upload serves all of a dtype's shapes, then config-major (D, causal)
  // so that one compiled kernel serves all N.
  //
  // FA1 beside FA2 on every f16 sweep shape: it parallelises over (batch, head) only and round-trips its
  // state through memory, so it is slow by design where B·H is small (N = 16384: 32 programs for D = 64,
  // about 0.2-0.3 s a launch; the case budget keeps it to a few launches). bf16 runs the same FA1 code
  // and is left out to keep the sweep short.
  for (DType dtype : {DType::f16, DType::bf16}) {
    if (q && dtype == DType::bf16)
      continue;
    for (int64_t D : {64, 128})
      for (int causal : {0, 1}) {
        for (int64_t N : {1024, 2048, 4096, 8192, 16384}) {
          if (q && N != 1024 && N != 4096)
            continue;
          cases.push_back(attention_case("attention", "kiln_fa2", "", sweep_problem(dtype, N, D, causal),
                                         false, options, cache));
        }
        for (int64_t N : {1024, 2048, 4096, 8192, 16384}) {
          if (dtype != DType::f16 || (q && (D != 64 || N != 1024 || causal)))
            continue;
          cases.push_back(attention_case("attention", "kiln_fa1", "", sweep_problem(dtype, N, D, causal),
                                         true, options, cache));
        }
      }
  }
  if (q)
    cases.push_back(attention_case("attention", "kiln_fa2", "", sweep_problem(DType::bf16, 4096, 128, 0),
                                   false, options, cache));
  // The long single head: one (batch, head), so N_Q / BLOCK_M programs only.
  for (int causal : {0, 1}) {
    if (q && causal)
      continue;
    cases.push_back(attention_case("attention", "kiln_fa2", "single head",
                                   single_problem(DType::f16, 1, 1, 16384, 64, causal), false, options,
                                   cache));
  }
  // The other head dims FlashAttention-3 serves: 96 and 192 (two head-dim tiles, SPLIT_D) and 256.
  for (int64_t D : {96, 192, 256})
    for (int causal : {0, 1}) {
      if (q && (D != 96 || causal))
        continue;
      cases.push_back(attention_case("attention", "kiln_fa2", "head dim",
                                     single_problem(DType::f16, 1, 16, 8192, D, causal), false, options, cache));
    }
  return cases;
}

std::vector<BenchCase> seed_cases(const BenchOptions& options) {
  auto cache = make_attention_data_cache();
  std::vector<BenchCase> cases;
  const bool q = options.quick;
  // Short single heads: launch- and latency-bound; where the fixed costs show.
  for (int64_t N : {64, 128, 256, 512, 1024, 2048}) {
    if (q && N != 128 && N != 1024)
      continue;
    cases.push_back(attention_case("seeds", "kiln_fa2", "", single_problem(DType::f16, 1, 1, N, 64, 0), false,
                                   options, cache));
  }
  // K read through a transposed block pointer (K_TRANSPOSED=1) vs row-major tiles transposed on chip.
  for (int64_t H : {1, 32}) {
    if (q && H != 32)
      continue;
    for (bool kt : {true, false}) {
      AttentionProblem p = single_problem(DType::f16, 1, H, 16384, 64, 0);
      p.k_transposed = kt;
      cases.push_back(attention_case("seeds", kt ? "kiln_fa2_kT" : "kiln_fa2_krow",
                                     kt ? "K_TRANSPOSED=1" : "K_TRANSPOSED=0", p, false, options, cache));
    }
  }
  // Masking strategies at the same shape, causal: kiln's two stages (whole tiles below the diagonal
  // unmasked, tiles above it never visited) vs every key tile visited with the mask applied.
  for (bool every : {false, true}) {
    AttentionCaseSpec spec;
    spec.suite = "seeds";
    spec.system = every ? "kiln_fa2_mask_every_tile" : "kiln_fa2_two_stage";
    spec.note = every ? "MASK_EVERY_TILE=1" : "MASK_EVERY_TILE=0";
    spec.problem = single_problem(DType::f16, 1, 1, 16384, 64, 1);
    spec.tunable = false; // one config for both strategies
    Config config = default_fa2_config(spec.problem);
    config.set("MASK_EVERY_TILE", every ? 1 : 0);
    spec.config = config;
    cases.push_back(attention_case(spec, options, cache));
  }
  // f32 inputs: exact f32 FMA dots vs tf32 tensor cores, one head of N_Q = N_K = 8192, D = 32.
  for (bool tf32 : {false, true}) {
    AttentionProblem p = single_problem(DType::f32, 1, 1, 8192, 32, 0);
    p.tf32 = tf32;
    cases.push_back(attention_case("seeds", tf32 ? "kiln_fa2_tf32" : "kiln_fa2",
                                   tf32 ? "TF32=1" : "exact f32", p, false, options, cache));
  }
  return cases;
}

std::vector<OutputArg> Fa2DeviceProblem::outputs() const {
  // fa2_fwd.h's argument order: Q, K, V, O, LSE, ...
  return {{3, o.bytes()}, {4, lse.bytes()}};
}

void Fa2DeviceProblem::poison_outputs() {
  o.fill_bytes(0xFF);
  lse.fill_bytes(0xFF);
}

CheckResult Fa2DeviceProblem::check(uint64_t seed) const {
  return check_attention(problem, host, o, lse, seed);
}

std::unique_ptr<Fa2DeviceProblem> make_fa2_device_problem(const AttentionProblem& p, uint64_t seed) {
  check_attention_problem(p);
  auto d = std::make_unique<Fa2DeviceProblem>();
  d->problem = p;
  d->host = AttentionInputs{HostBuffer(p.dtype, q_numel(p), "Q"), HostBuffer(p.dtype, kv_numel(p), "K"),
                            HostBuffer(p.dtype, kv_numel(p), "V")};
  fill_uniform(d->host.q, seed, 1.0);
  fill_uniform(d->host.k, seed + 1, 1.0);
  fill_uniform(d->host.v, seed + 2, 1.0);
  d->q = upload(d->host.q);
  d->k = upload(d->host.k);
  d->v = upload(d->host.v);
  d->o = poisoned_device_buffer(p.dtype, q_numel(p));
  d->lse = poisoned_device_buffer(DType::f32, p.B * p.H * p.N_Q);
  // Host stand-ins only name the outputs for the argument list; the kernel writes the device buffers.
  AttentionOutputs out{HostBuffer(p.dtype, 0, "O"), HostBuffer(DType::f32, 0, "LSE")};
  const DeviceMirrors mirrors = {
      {&d->host.q, &d->q}, {&d->host.k, &d->k}, {&d->host.v, &d->v}, {&out.o, &d->o}, {&out.lse, &d->lse}};
  const Kernel ir = fa2_fwd_def().build(default_fa2_config(p));
  d->args = to_launch_args(ir, fa2_interp_args(p, d->host, out), mirrors);
  return d;
}

} // namespace kiln::bench
