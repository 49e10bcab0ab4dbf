#include "bench/matmul_bench.h"

#include "bench/random_fill.h"

#include "kernels/compare.h"
#include "kernels/matmul/matmul.h"
#include "kernels/matmul/matmul_launch.h"

#include <functional>
#include <optional>
#include <random>
#include <tuple>

namespace kiln::bench {

namespace {

constexpr int64_t kSampledEntries = 512;

// C = A @ B at kSampledEntries random (m, n) in double from the rounded inputs: a full reference of an
// 8192³ product is 5·10¹¹ multiply-adds.
CheckResult check_matmul(const MatmulProblem& p, const HostBuffer& a, const HostBuffer& b,
                         const rt::DeviceBuffer& c, uint64_t seed) {
  HostBuffer c_host = download(c, p.dtype, p.M * p.N, "C");
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<int64_t> row(0, p.M - 1), col(0, p.N - 1);
  std::vector<double> got, want;
  for (int64_t s = 0; s < kSampledEntries; ++s) {
    // The corners are always in the sample: edge tiles are where boundary handling goes wrong.
    int64_t m = s == 0 ? 0 : s == 1 ? p.M - 1 : row(rng), n = s == 0 ? 0 : s == 1 ? p.N - 1 : col(rng);
    double acc = 0;
    for (int64_t k = 0; k < p.K; ++k)
      acc += a.get(m * p.K + k) * b.get(k * p.N + n);
    want.push_back(acc);
    got.push_back(c_host.get(m * p.N + n));
  }
  Comparison cmp = compare_to_reference(got, want);
  CheckResult r;
  r.method = "sampled";
  r.elements = kSampledEntries;
  r.error = cmp.relative_error;
  r.tolerance = tolerance(p.dtype, p.tf32);
  r.nonfinite_mismatches = cmp.nonfinite_mismatches;
  r.ok = cmp.ok(r.tolerance);
  return r;
}

void run_matmul(Session& s, const JitKernel& k, CaseRecord& r, const MatmulProblem& p, const Config& config,
                bool tunable, bool flush_l2) {
  HostBuffer a(p.dtype, p.M * p.K, "A"), b(p.dtype, p.K * p.N, "B");
  fill_uniform(a, s.options().seed + 11, 1.0);
  fill_uniform(b, s.options().seed + 12, 1.0);
  rt::DeviceBuffer da = upload(a), db = upload(b), dc = poisoned_device_buffer(p.dtype, p.M * p.N);
  const MatmulStrides strides = MatmulStrides::packed(p); // row-major A, B and C
  const MatmulPointers ptrs{da.ptr(), db.ptr(), dc.ptr()};
  std::function<void(rt::Stream&)> launch;
  std::optional<MatmulPlan> plan;
  std::optional<Session::Launch> fixed;
  if (tunable && s.options().tune && s.options().matmul_overrides.empty()) {
    // What a caller of plan_matmul gets: the tuner's one-kernel pick, or split-K where it timed faster.
    MatmulPlanOptions po;
    po.tune.mode = rt::AutotuneMode::On;
    po.tune.bytes = r.bytes;
    plan = plan_matmul(s.tuner(), p, strides, ptrs, po);
    r.config = plan->str();
    launch = [&](rt::Stream& stream) { plan->launch(stream); };
  } else {
    const std::vector<LaunchArg> args = matmul_args(p, strides, ptrs);
    const SizeArgs sizes = {{"M", p.M}, {"N", p.N}, {"K", p.K}};
    fixed = s.launch_for(matmul_def(), config, k, sizes, args, {{2, dc.bytes()}}, false, r);
    launch = [&, args](rt::Stream& stream) { fixed->kernel->launch(fixed->grid, args, stream); };
  }
  rt::Stream default_stream;
  launch(default_stream);
  r.check = check_matmul(p, a, b, dc, s.options().seed ^ 0xC0FFEE);
  if (!r.check.ok)
    return;
  s.time(r, launch, flush_l2);
}

} // namespace

BenchCase matmul_case(const MatmulProblem& p, const BenchOptions& options, const std::string& suite,
                      const std::string& system, const std::string& note, const CodegenOptions& codegen,
                      bool flush_l2) {
  BenchCase c;
  c.record =
      case_record(suite, "matmul", system, note, p.dtype, {{"M", p.M}, {"N", p.N}, {"K", p.K}}, -1, codegen);
  c.record.flops = 2.0 * double(p.M) * double(p.N) * double(p.K);
  c.codegen = codegen;
  c.def = matmul_def();
  c.config = c.def.with_overrides(default_matmul_config(p), options.matmul_overrides);
  // Only the standard cases with every code-generator switch on are tuned (an ablation times one config).
  const bool tunable = codegen.all_on();
  c.run = [p, config = c.config, tunable, flush_l2](Session& s, const JitKernel& k, CaseRecord& rec) {
    run_matmul(s, k, rec, p, config, tunable, flush_l2);
  };
  return c;
}

std::vector<BenchCase> matmul_cases(const BenchOptions& options) {
  std::vector<BenchCase> cases;
  const bool q = options.quick;
  for (DType dtype : {DType::f16, DType::bf16}) {
    if (q && dtype == DType::bf16)
      continue;
    for (int64_t n : {1024, 2048, 4096, 8192})
      if (!q || n == 1024 || n == 4096)
        cases.push_back(matmul_case(MatmulProblem{n, n, n, dtype}, options, "matmul", "kiln_matmul"));
    // Skinny: tall A, wide B, and a long reduction.
    for (auto [M, N, K] :
         {std::tuple<int64_t, int64_t, int64_t>{16384, 1024, 1024}, {1024, 16384, 1024}, {1024, 1024, 16384}})
      if (!q || M == 16384)
        cases.push_back(matmul_case(MatmulProblem{M, N, K, dtype}, options, "matmul", "kiln_matmul"));
  }
  return cases;
}

} // namespace kiln::bench
