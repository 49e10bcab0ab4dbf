#include "bench/self_test.h"

#include "bench/ablation_bench.h"
#include "bench/attention_bench.h"
#include "bench/attention_bwd_bench.h"
#include "bench/attention_bwd_reference.h"
#include "bench/attention_sampled_reference.h"
#include "bench/autotune_bench.h"
#include "bench/bench_record.h"
#include "bench/child_probe.h"
#include "bench/compile_bench.h"
#include "bench/matmul_bench.h"
#include "bench/memory_bench.h"
#include "bench/model_bench.h"
#include "bench/random_fill.h"
#include "bench/user_kernels_bench.h"

#include "kernels/attention/attention_bwd_problem.h"
#include "kernels/compare.h"
#include "runtime/nvrtc.h"
#include "support/error.h"

#include <fmt/format.h>

#include <cmath>
#include <set>
#include <string>

namespace kiln::bench {

namespace {

int report(bool ok, const std::string& what) {
  fmt::print(stderr, "self-test {}: {}\n", ok ? "ok  " : "FAIL", what);
  return ok ? 0 : 1;
}

// The sampled reference must reproduce reference() on the rows it samples, for every masking mode,
// GQA and both layouts; and gather_rows must pick the same rows out of the kernel's output layout.
int check_sampled_reference() {
  int failures = 0;
  struct Shape {
    int64_t B, H, H_KV, N_Q, N_K, D;
    int causal;
    bool bshd;
  };
  for (Shape s : {Shape{2, 4, 2, 37, 53, 24, 0, false}, Shape{1, 3, 3, 64, 64, 16, 1, true},
                  Shape{3, 2, 1, 40, 29, 8, 2, false}, Shape{1, 1, 1, 29, 40, 32, 1, false}}) {
    AttentionProblem p;
    p.B = s.B, p.H = s.H, p.H_KV = s.H_KV, p.N_Q = s.N_Q, p.N_K = s.N_K, p.D = s.D;
    p.causal = s.causal;
    p.bshd_layout = s.bshd;
    AttentionInputs in{HostBuffer(p.dtype, q_numel(p), "Q"), HostBuffer(p.dtype, kv_numel(p), "K"),
                       HostBuffer(p.dtype, kv_numel(p), "V")};
    fill_uniform(in.q, 1, 1.0);
    fill_uniform(in.k, 2, 1.0);
    fill_uniform(in.v, 3, 1.0);
    const AttentionResult full = reference(p, in);
    const std::vector<QueryRow> rows = sample_query_rows(p, 24, 7);
    const AttentionResult sampled = sampled_reference(p, in, rows);
    AttentionResult want;
    for (const QueryRow& r : rows) {
      const size_t row = static_cast<size_t>((r.b * p.H + r.h) * p.N_Q + r.i);
      for (int64_t d = 0; d < p.D; ++d)
        want.o.push_back(full.o[row * static_cast<size_t>(p.D) + static_cast<size_t>(d)]);
      want.lse.push_back(full.lse[row]);
    }
    Comparison co = compare_to_reference(sampled.o, want.o), cl = compare_to_reference(sampled.lse, want.lse);
    failures += report(co.ok(1e-13) && cl.ok(1e-13) && !rows.empty(),
                       fmt::format("sampled reference = reference on {} rows of {}: O {}, LSE {}",
                                   rows.size(), p.str(), co.str(), cl.str()));

    // An output buffer in the problem's layout holding the reference, read back through gather_rows.
    AttentionOutputs out{HostBuffer(p.dtype, q_numel(p), "O"),
                         HostBuffer(DType::f32, p.B * p.H * p.N_Q, "LSE")};
    const AttentionStrides st = attention_strides(p);
    for (int64_t b = 0; b < p.B; ++b)
      for (int64_t h = 0; h < p.H; ++h)
        for (int64_t i = 0; i < p.N_Q; ++i) {
          const size_t row = static_cast<size_t>((b * p.H + h) * p.N_Q + i);
          for (int64_t d = 0; d < p.D; ++d)
            out.o.set(b * st.o.b + h * st.o.h + i * st.o.n + d, full.o[row * static_cast<size_t>(p.D) + d]);
          out.lse.set(static_cast<int64_t>(row), full.lse[row]);
        }
    const AttentionResult gathered = gather_rows(p, out.o, out.lse, rows);
    const AttentionResult all = gather_outputs(p, out);
    bool same = gathered.o.size() == want.o.size();
    for (size_t r = 0; same && r < rows.size(); ++r) {
      const size_t row = static_cast<size_t>((rows[r].b * p.H + rows[r].h) * p.N_Q + rows[r].i);
      for (size_t d = 0; d < static_cast<size_t>(p.D); ++d)
        same &= gathered.o[r * p.D + d] == all.o[row * p.D + d];
      same &= gathered.lse[r] == all.lse[row] || (std::isinf(gathered.lse[r]) && std::isinf(all.lse[row]));
    }
    failures += report(same, fmt::format("gather_rows agrees with gather_outputs ({})", p.str()));
  }
  return failures;
}

int check_fill() {
  int failures = 0;
  for (DType t : {DType::f16, DType::bf16, DType::f32}) {
    HostBuffer a(t, 4096, "a"), b(t, 4096, "b");
    fill_uniform(a, 42, 2.0);
    fill_uniform(b, 42, 2.0);
    double lo = 0, hi = 0, sum = 0;
    bool nonzero = false;
    for (int64_t i = 0; i < a.numel(); ++i) {
      const double v = a.get(i);
      lo = std::min(lo, v), hi = std::max(hi, v), sum += v;
      nonzero |= v != 0;
    }
    failures +=
        report(a.bytes == b.bytes && nonzero && lo >= -2 && hi <= 2 && lo < -1.5 && hi > 1.5 &&
                   std::fabs(sum / 4096) < 0.1,
               fmt::format("fill_uniform {}: deterministic, in [-2, 2] (min {:.3f}, max {:.3f}, mean {:.3f})",
                           dtype_name(t), lo, hi, sum / 4096));
  }
  return failures;
}

// The sampled backward reference must reproduce reference_backward on the elements it samples, for every
// masking mode, GQA (dK, dV summed over a kv head's group) and both layouts; and gather_sampled_grads must
// read the same elements out of the kernels' layouts.
int check_sampled_backward_reference() {
  int failures = 0;
  struct Shape {
    int64_t B, H, H_KV, N_Q, N_K, D;
    int causal;
    bool bshd;
  };
  for (Shape sh : {Shape{2, 4, 2, 37, 53, 24, 0, false}, Shape{1, 3, 3, 64, 64, 16, 1, true},
                   Shape{3, 2, 1, 40, 29, 8, 2, false}, Shape{1, 1, 1, 29, 40, 32, 1, false}}) {
    AttentionProblem p;
    p.B = sh.B, p.H = sh.H, p.H_KV = sh.H_KV, p.N_Q = sh.N_Q, p.N_K = sh.N_K, p.D = sh.D;
    p.causal = sh.causal;
    p.bshd_layout = sh.bshd;
    AttentionInputs in{HostBuffer(p.dtype, q_numel(p), "Q"), HostBuffer(p.dtype, kv_numel(p), "K"),
                       HostBuffer(p.dtype, kv_numel(p), "V")};
    fill_uniform(in.q, 1, 1.0);
    fill_uniform(in.k, 2, 1.0);
    fill_uniform(in.v, 3, 1.0);
    HostBuffer dout(p.dtype, q_numel(p), "dO");
    fill_uniform(dout, 4, 1.0);
    const AttentionGrads full = reference_backward(p, logical_bwd_tensors(p, in, dout));
    const BwdSample sample = sample_bwd(p, 2, 6, 5, 11);
    const SampledGrads got = sampled_reference_backward(p, in, dout, sample);
    SampledGrads want;
    const size_t D = static_cast<size_t>(p.D);
    for (const BwdSample::Row& r : sample.rows)
      for (size_t d = 0; d < D; ++d)
        want.dq.push_back(full.dq[static_cast<size_t>((r.b * p.H + r.h) * p.N_Q + r.i) * D + d]);
    for (const BwdSample::Key& k : sample.keys)
      for (size_t d = 0; d < D; ++d) {
        want.dk.push_back(full.dk[static_cast<size_t>((k.b * p.H_KV + k.hk) * p.N_K + k.j) * D + d]);
        want.dv.push_back(full.dv[static_cast<size_t>((k.b * p.H_KV + k.hk) * p.N_K + k.j) * D + d]);
      }
    const Comparison cq = compare_to_reference(got.dq, want.dq), ck = compare_to_reference(got.dk, want.dk),
                     cv = compare_to_reference(got.dv, want.dv);
    failures += report(cq.ok(1e-12) && ck.ok(1e-12) && cv.ok(1e-12) && !sample.rows.empty() &&
                           !sample.keys.empty() && got.max_abs_lse > 0,
                       fmt::format("sampled backward reference = reference_backward on {} dQ rows and {} keys of "
                                   "{}: dQ {}, dK {}, dV {}",
                                   sample.rows.size(), sample.keys.size(), p.str(), cq.str(), ck.str(), cv.str()));

    // Gradient buffers in the kernels' layouts holding the full reference, read back through the sample.
    const AttentionStrides st = attention_strides(p);
    HostBuffer dq(p.dtype, q_numel(p), "dQ"), dk(p.dtype, kv_numel(p), "dK"), dv(p.dtype, kv_numel(p), "dV");
    size_t n = 0;
    for (int64_t b = 0; b < p.B; ++b)
      for (int64_t h = 0; h < p.H; ++h)
        for (int64_t i = 0; i < p.N_Q; ++i)
          for (int64_t d = 0; d < p.D; ++d)
            dq.set(element_offset(st.q, b, h, i, d), full.dq[n++]);
    n = 0;
    for (int64_t b = 0; b < p.B; ++b)
      for (int64_t h = 0; h < p.H_KV; ++h)
        for (int64_t j = 0; j < p.N_K; ++j)
          for (int64_t d = 0; d < p.D; ++d, ++n) {
            dk.set(element_offset(st.k, b, h, j, d), full.dk[n]);
            dv.set(element_offset(st.k, b, h, j, d), full.dv[n]);
          }
    const SampledGrads gathered = gather_sampled_grads(p, dq, dk, dv, sample);
    // The buffers round to f16: compare with the sample rounded the same way.
    const Comparison gq = compare_to_reference(gathered.dq, want.dq), gk = compare_to_reference(gathered.dk, want.dk),
                     gv = compare_to_reference(gathered.dv, want.dv);
    failures += report(gathered.dq.size() == want.dq.size() && gathered.dk.size() == want.dk.size() &&
                           gq.ok(tolerance(p.dtype)) && gk.ok(tolerance(p.dtype)) && gv.ok(tolerance(p.dtype)),
                       fmt::format("gather_sampled_grads reads the sampled elements ({}): dQ {}, dK {}, dV {}", p.str(),
                                   gq.str(), gk.str(), gv.str()));
  }
  // The sweep's budget: one kv head at N = 16384, D = 128 is 2·N²·D multiply-adds.
  const AttentionProblem big = sweep_problem(DType::f16, 16384, 128, 0);
  failures += report(sampled_backward_macs(big, 1) == 2.0 * 16384.0 * 16384.0 * 128.0,
                     fmt::format("sampled backward reference cost at {}: {:.2e} multiply-adds per kv head", big.str(),
                                 sampled_backward_macs(big, 1)));
  return failures;
}

// The backward's FLOP convention (ANCHORS.md): 2.5 × the forward's, 3.5 × for a forward + backward step; the
// forward's is 4·B·H·N²·D, halved when causal.
int check_bwd_flops() {
  int failures = 0;
  for (int causal : {0, 1}) {
    const AttentionProblem p = sweep_problem(DType::f16, 4096, 64, causal);
    const double fwd = 4.0 * 4 * 32 * 4096.0 * 4096.0 * 64 / (causal ? 2 : 1);
    failures += report(attention_flops(p) == fwd && attention_bwd_flops(p) == 2.5 * fwd &&
                           attention_fwd_bwd_flops(p) == 3.5 * fwd,
                       fmt::format("backward FLOPs of {}: {:.4e} = 2.5 × {:.4e}; step {:.4e}", p.str(),
                                   attention_bwd_flops(p), fwd, attention_fwd_bwd_flops(p)));
  }
  // Three records per sweep shape with the keys peers.py writes for the same shapes.
  BenchOptions options;
  const std::vector<BenchCase> cases = attention_bwd_cases(options);
  std::set<std::string> systems;
  bool keys_ok = cases.size() == 3 * 40;
  for (const BenchCase& c : cases) {
    systems.insert(c.record.op + " " + c.record.system);
    const auto& s = c.record.shape;
    keys_ok &= c.record.key == case_key(c.record.op, c.record.dtype, s, c.record.causal) && s.size() == 4 &&
               s[0].second * s[2].second == 16384 && s[1].second * s[3].second == 2048 && !c.more_kernels.empty();
  }
  keys_ok &= cases.empty() ? false
                           : cases.front().record.key == "attention_bwd:f16:B16:H32:N1024:D64:causal0" &&
                                 systems == std::set<std::string>{"attention_bwd kiln_fa2_bwd",
                                                                  "attention_bwd kiln_fa2_bwd_atomic",
                                                                  "attention_fwd_bwd kiln_fa2"};
  failures += report(keys_ok, fmt::format("attention_bwd: {} cases, 3 per sweep shape, keys {}...", cases.size(),
                                          cases.empty() ? "" : cases.front().record.key));
  return failures;
}

int check_keys() {
  const std::string k = case_key("attention", "f16", {{"B", 16}, {"H", 16}, {"N", 1024}, {"D", 128}}, 1);
  const std::string m = case_key("matmul", "bf16", {{"M", 4096}, {"N", 4096}, {"K", 4096}}, -1);
  return report(k == "attention:f16:B16:H16:N1024:D128:causal1" && m == "matmul:bf16:M4096:N4096:K4096",
                fmt::format("case keys as peers.py writes them: {} and {}", k, m));
}

// report.py indexes records by (key, system): two cases with the same pair would hide one of them.
int check_unique_case_ids() {
  int failures = 0;
  for (bool quick : {false, true}) {
    BenchOptions options;
    options.quick = quick;
    std::set<std::pair<std::string, std::string>> seen;
    std::string duplicate;
    size_t n = 0;
    for (auto cases : {memory_cases, matmul_cases, attention_cases, seed_cases, attention_bwd_cases, ablation_cases,
                       compile_cases, autotune_cases, model_cases, user_kernel_cases})
      for (const BenchCase& c : cases(options)) {
        ++n;
        if (!seen.insert({c.record.key, c.record.system}).second)
          duplicate = c.record.key + " " + c.record.system;
        if (c.record.suite.empty() || (!c.run && !c.run_self))
          duplicate = "(incomplete case) " + c.record.key + " " + c.record.system;
      }
    failures += report(duplicate.empty(),
                       fmt::format("{} {} cases, each (key, system) once{}", n, quick ? "quick" : "standard",
                                   duplicate.empty() ? "" : ": repeated " + duplicate));
  }
  return failures;
}

int check_options_text() {
  int failures = 0;
  const std::map<std::string, int64_t> o = parse_overrides(" BLOCK_N=128, num_stages = 3", "config");
  failures += report(o.size() == 2 && o.at("BLOCK_N") == 128 && o.at("num_stages") == 3,
                     "parse_overrides reads NAME=V items with spaces");
  std::string why;
  try {
    (void)parse_overrides("BLOCK_N=12x", "config");
  } catch (const Error& e) {
    why = e.what();
  }
  failures +=
      report(why.find("--config") != std::string::npos && why.find("BLOCK_N=12x") != std::string::npos,
             "parse_overrides names the option and the bad item: " + why);
  // Each ablation variant turns exactly one switch off, after the all-on baseline.
  const std::vector<AblationVariant> variants = ablation_variants();
  bool one_off_each = variants.size() == 1 + CodegenOptions::kSwitches && variants[0].options.all_on();
  std::set<std::string> texts;
  for (const AblationVariant& v : variants) {
    const CodegenOptions& c = v.options;
    const int off = c.switches_off();
    one_off_each &=
        (&v == &variants[0] ? off == 0 : off == 1) && texts.insert(c.str()).second;
  }
  failures += report(one_off_each,
                     fmt::format("{} ablation variants: all on, then one switch off each", variants.size()));
  // --switch-off takes a variant's options by name and names them all for anything else.
  std::string refused;
  try {
    (void)switched_off_options("all_on");
  } catch (const Error& e) {
    refused = e.what();
  }
  failures += report(!switched_off_options("no_prefetch_buffers").prefetch_buffers &&
                         switched_off_options("no_prefetch_buffers").switches_off() == 1 &&
                         refused.find("no_tensor_cores") != std::string::npos &&
                         refused.find("'all_on'") != std::string::npos,
                     "--switch-off's variant by name, and the list for a name that is not one: " + refused);
  failures += report(median({3, 1, 2}) == 2 && median({4, 1, 2, 3}) == 2.5 && std::isnan(median({})),
                     "median of odd, even and empty samples");
  return failures;
}

// The model's matrix FLOPs for FA2 must be the FLOP convention's count when the tiles divide the problem.
int check_model_prediction() {
  AttentionProblem p = single_problem(DType::f16, 1, 2, 256, 64, 0);
  Config config = default_fa2_config(p);
  config.set("BLOCK_M", 64).set("BLOCK_N", 64);
  rt::PeakRates peaks{989, 3350, "self-test"};
  const llvm::json::Object m = predict_fa2(p, config, peaks);
  const double flops = m.getNumber("matrix_flops").getValueOr(-1);
  const double predicted = m.getNumber("predicted_ms").getValueOr(-1);
  const double compute = m.getNumber("compute_ms").getValueOr(-1),
               memory = m.getNumber("memory_ms").getValueOr(-1);
  return report(
      flops == attention_flops(p) && predicted > 0 && predicted == std::max(compute, memory),
      fmt::format("model of FA2 {}: {} matrix FLOPs (convention {}), predicted {:.4f} ms = max(compute "
                  "{:.4f}, memory {:.4f})",
                  p.str(), flops, attention_flops(p), predicted, compute, memory));
}

// The compile suite's child processes, end to end without a GPU: a cold compile into a fresh cache directory
// misses, the next process finds the entry on disk.
int check_compile_probe() {
  std::string why;
  if (!rt::nvrtc_available(&why)) {
    fmt::print(stderr, "self-test skip: compile probe (no NVRTC: {})\n", why);
    return 0;
  }
  ScratchDir dir("kiln-bench-self-test");
  std::string outcome;
  try {
    ProbeRequest req;
    req.name = "compile";
    req.dir = dir.path();
    req.args = {"--arch=sm_80"};
    req.timeout_s = 120;
    const llvm::json::Object cold = run_probe(req), warm = run_probe(req);
    outcome = fmt::format("cold {} in {:.0f} ms, warm {} in {:.1f} ms", json_string(cold, "cache", "compile"),
                          json_number(cold, "total_ms", "compile"), json_string(warm, "cache", "compile"),
                          json_number(warm, "total_ms", "compile"));
    const bool ok = json_string(cold, "cache", "compile") == "miss" &&
                    json_string(warm, "cache", "compile") == "disk" &&
                    json_number(warm, "total_ms", "compile") > 0 && !cold.getNumber("load_ms");
    return report(ok, "compile probe in child processes: " + outcome);
  } catch (const Error& e) {
    return report(false, std::string("compile probe in child processes: ") + e.what());
  }
}

} // namespace

int run_self_test() {
  return check_sampled_reference() + check_sampled_backward_reference() + check_bwd_flops() + check_fill() + check_keys() + check_unique_case_ids() +
         check_options_text() + check_model_prediction() + check_compile_probe();
}

} // namespace kiln::bench
