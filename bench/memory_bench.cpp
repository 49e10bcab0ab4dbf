#include "bench/memory_bench.h"

#include "bench/random_fill.h"

#include "kernels/compare.h"
#include "kernels/softmax/softmax.h"
#include "kernels/vector_add/vector_add.h"

#include <cmath>
#include <random>

namespace kiln::bench {

namespace {

constexpr int64_t kSampledSoftmaxRows = 64;

void run_vector_add(Session& s, const JitKernel& k, CaseRecord& r, int64_t n, const Config& config,
                    bool tunable) {
  HostBuffer x(DType::f32, n, "x"), y(DType::f32, n, "y");
  fill_uniform(x, s.options().seed + 21, 100.0);
  fill_uniform(y, s.options().seed + 22, 100.0);
  rt::DeviceBuffer dx = upload(x), dy = upload(y), dout = poisoned_device_buffer(DType::f32, n);
  const std::vector<LaunchArg> args = {LaunchArg::pointer(dx), LaunchArg::pointer(dy),
                                       LaunchArg::pointer(dout), LaunchArg::of_int(n)};
  const Session::Launch l =
      s.launch_for(vector_add_def(), config, k, {{"n", n}}, args, {{2, dout.bytes()}}, tunable, r);
  l.kernel->launch(l.grid, args);
  // f32 addition is exact to the bit on both sides: every element must agree.
  HostBuffer out = download(dout, DType::f32, n, "out");
  std::vector<float> want(static_cast<size_t>(n));
  vector_add_reference(x.data<float>(), y.data<float>(), want.data(), n);
  int64_t mismatches = 0;
  double max_diff = 0;
  for (int64_t i = 0; i < n; ++i) {
    const float got = out.data<float>()[i];
    if (got != want[static_cast<size_t>(i)]) {
      ++mismatches;
      max_diff = std::isnan(got) ? INFINITY
                                 : std::max(max_diff, double(std::fabs(got - want[static_cast<size_t>(i)])));
    }
  }
  r.check.method = "exact";
  r.check.elements = n;
  r.check.error = max_diff;
  r.check.tolerance = 0;
  r.check.nonfinite_mismatches = mismatches;
  r.check.ok = mismatches == 0;
  if (!r.check.ok)
    return;
  s.time(
      r, [&](rt::Stream& stream) { l.kernel->launch(l.grid, args, stream); }, /*flush_l2=*/true);
}

void run_softmax(Session& s, const JitKernel& k, CaseRecord& r, const SoftmaxProblem& p, const Config& config,
                 bool tunable) {
  HostBuffer in(p.dtype, p.n_rows * p.n_cols, "in");
  fill_uniform(in, s.options().seed + 31, 8.0);
  rt::DeviceBuffer din = upload(in), dout = poisoned_device_buffer(p.dtype, p.n_rows * p.n_cols);
  const std::vector<LaunchArg> args = {LaunchArg::pointer(dout),    LaunchArg::pointer(din),
                                       LaunchArg::of_int(p.n_cols), LaunchArg::of_int(p.n_cols),
                                       LaunchArg::of_int(p.n_rows), LaunchArg::of_int(p.n_cols)};
  const Session::Launch l =
      s.launch_for(softmax_def(), config, k, {{"n_rows", p.n_rows}, {"n_cols", p.n_cols}}, args,
                   {{0, dout.bytes()}}, tunable, r);
  l.kernel->launch(l.grid, args);
  HostBuffer out = download(dout, p.dtype, p.n_rows * p.n_cols, "out");
  // A sample of rows (the first and last always), copied into a small problem for softmax_reference.
  std::mt19937_64 rng(s.options().seed ^ 0xABCD);
  std::uniform_int_distribution<int64_t> pick(0, p.n_rows - 1);
  SoftmaxProblem sample{kSampledSoftmaxRows, p.n_cols, p.dtype};
  HostBuffer sample_in(p.dtype, sample.n_rows * p.n_cols, "sampled rows");
  std::vector<double> got;
  for (int64_t s_row = 0; s_row < sample.n_rows; ++s_row) {
    const int64_t row = s_row == 0 ? 0 : s_row == 1 ? p.n_rows - 1 : pick(rng);
    for (int64_t c = 0; c < p.n_cols; ++c) {
      sample_in.set(s_row * p.n_cols + c, in.get(row * p.n_cols + c));
      got.push_back(out.get(row * p.n_cols + c));
    }
  }
  Comparison cmp = compare_to_reference(got, softmax_reference(sample, sample_in));
  r.check.method = "sampled";
  r.check.elements = static_cast<int64_t>(got.size());
  r.check.error = cmp.relative_error;
  r.check.tolerance = tolerance(p.dtype);
  r.check.nonfinite_mismatches = cmp.nonfinite_mismatches;
  r.check.ok = cmp.ok(r.check.tolerance);
  if (!r.check.ok)
    return;
  s.time(
      r, [&](rt::Stream& stream) { l.kernel->launch(l.grid, args, stream); }, /*flush_l2=*/true);
}

BenchCase vector_add_case(int64_t n) {
  BenchCase c;
  c.record = case_record("memory", "vector_add", "kiln_vector_add", "", DType::f32, {{"n", n}}, -1, {});
  c.record.bytes = 3.0 * 4.0 * double(n); // x and y read, out written
  c.def = vector_add_def();
  c.config = c.def.default_config();
  c.run = [n, config = c.config](Session& s, const JitKernel& k, CaseRecord& rec) {
    run_vector_add(s, k, rec, n, config, /*tunable=*/true);
  };
  return c;
}

} // namespace

BenchCase softmax_case(const SoftmaxProblem& p, const std::string& suite, const std::string& system,
                       const std::string& note, const CodegenOptions& codegen) {
  BenchCase c;
  c.record = case_record(suite, "softmax", system, note, p.dtype, {{"rows", p.n_rows}, {"cols", p.n_cols}},
                         -1, codegen);
  c.record.bytes = 2.0 * double(p.n_rows) * double(p.n_cols) * dtype_bytes(p.dtype); // in read, out written
  c.codegen = codegen;
  c.def = softmax_def();
  c.config = softmax_config(p);
  // Only the standard cases with every code-generator switch on are tuned (an ablation times one config).
  c.run = [p, config = c.config, tunable = codegen.all_on()](Session& s, const JitKernel& k,
                                                             CaseRecord& rec) {
    run_softmax(s, k, rec, p, config, tunable);
  };
  return c;
}

std::vector<BenchCase> memory_cases(const BenchOptions& options) {
  const bool q = options.quick;
  std::vector<BenchCase> cases;
  for (int64_t n : {int64_t{1} << 24, int64_t{1} << 27})
    if (!q || n == (int64_t{1} << 24))
      cases.push_back(vector_add_case(n));
  for (DType dtype : {DType::f32, DType::f16})
    for (int64_t cols : {1024, 4096})
      if (!q || (dtype == DType::f16 && cols == 1024))
        cases.push_back(softmax_case(SoftmaxProblem{16384, cols, dtype}, "memory", "kiln_softmax"));
  return cases;
}

} // namespace kiln::bench
