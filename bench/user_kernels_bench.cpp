#include "bench/user_kernels_bench.h"

#include "bench/matmul_bench.h"

#include "examples/kernels/layernorm_fwd.h"
#include "examples/kernels/matmul_bias_gelu.h"
#include "examples/kernels/online_logsumexp.h"
#include "tools/kernel_run.h"

#include <fmt/format.h>

#include <algorithm>

namespace kiln::bench {
namespace {

struct UserProblem {
  KernelDef def;
  std::vector<std::pair<std::string, int64_t>> shape; // the timed problem's sizes, in key order
  std::map<std::string, int64_t> params;              // the config's parameters
  std::map<std::string, int64_t> check_sizes;         // the smaller problem the check runs
  double flops = 0, bytes = 0;
};

// Checks the launched config on the smaller problem, on the GPU, against the kernel's reference; fills
// r.check.
bool check_on_smaller_problem(const UserProblem& p, const Config& config, uint64_t seed, CaseRecord& r) {
  std::map<std::string, int64_t> assignments = p.check_sizes;
  for (const auto& [name, v] : config.params)
    assignments[name] = v;
  assignments["num_warps"] = config.num_warps;
  assignments["num_stages"] = config.num_stages;
  cli::KernelRun run = cli::prepare_kernel_run(p.def, assignments, {}, {}, seed);
  cli::execute_kernel_run(run, Executor::Gpu);
  r.check.method = "full, smaller problem (" + run.problem.sizes_text() + ")";
  r.check.ok = true;
  r.check.error = 0;
  r.check.elements = 0;
  for (const cli::OutputCheck& c : cli::check_kernel_run(run)) {
    r.check.error = std::max(r.check.error, c.comparison.relative_error);
    r.check.tolerance = c.tolerance;
    r.check.nonfinite_mismatches += c.comparison.nonfinite_mismatches;
    r.check.elements += run.buffer(c.name)->host.numel();
    r.check.ok = r.check.ok && c.ok();
  }
  return r.check.ok;
}

BenchCase user_case(const UserProblem& p, const std::string& note) {
  BenchCase c;
  c.record = case_record("user", p.def.name, "kiln_" + p.def.name, note, DType::f16, p.shape, -1, {});
  c.record.flops = p.flops;
  c.record.bytes = p.bytes;
  c.def = p.def;
  c.config = p.def.with_overrides(p.def.default_config(), p.params);
  c.run = [p, config = c.config](Session& s, const JitKernel& k, CaseRecord& r) {
    std::map<std::string, int64_t> assignments(p.shape.begin(), p.shape.end());
    for (const auto& [name, v] : p.params)
      assignments[name] = v;
    const cli::KernelProblem problem = cli::parse_kernel_problem(p.def, assignments);
    const LaunchPlan plan = cli::plan_for(problem, config);
    cli::DeviceInputs in = cli::upload_random_inputs(plan, s.options().seed);
    const Session::Launch l = s.launch_for(p.def, config, k, problem.sizes, in.args, in.outputs, true, r);
    if (!check_on_smaller_problem(p, l.tuned ? l.tuned->config : config, s.options().seed, r))
      return;
    s.time(
        r, [&](rt::Stream& stream) { l.kernel->launch(l.grid, in.args, stream); }, /*flush_l2=*/true);
  };
  return c;
}

} // namespace

std::vector<BenchCase> user_kernel_cases(const BenchOptions& options) {
  const bool q = options.quick;
  std::vector<BenchCase> cases;
  {
    const int64_t rows = q ? 4096 : 16384, cols = 4096;
    UserProblem p{tutorial::layernorm_fwd_def(),
                  {{"n_rows", rows}, {"n_cols", cols}},
                  {{"BLOCK_N", 4096}, {"ROWS", 1}},
                  {{"n_rows", 67}, {"n_cols", 4000}}};
    p.bytes = 2.0 * 2.0 * double(rows) * double(cols); // x read, y written (weight and bias: 16 KB)
    cases.push_back(user_case(p, "tutorial 10"));
  }
  {
    const int64_t n = q ? 2048 : 4096;
    UserProblem p{tutorial::matmul_bias_gelu_def(),
                  {{"M", n}, {"N", n}, {"K", n}},
                  {},
                  {{"M", 300}, {"N", 260}, {"K", 200}}};
    p.flops = 2.0 * double(n) * double(n) * double(n);
    cases.push_back(user_case(p, "tutorial 11"));
    // kiln's own plain matmul at the same shape, timed as the fused kernel is (L2 flushed) and right after it:
    // the figure is the ratio of the two, which the matmul suite's case (L2 warm, timed minutes
    // earlier or later) does not measure like for like.
    cases.push_back(matmul_case(MatmulProblem{n, n, n, DType::f16}, options, "user", "kiln_plain_matmul",
                                "kiln's matmul beside tutorial 11, L2 flushed as it is", {}, /*flush_l2=*/true));
  }
  {
    const int64_t rows = q ? 4096 : 16384, cols = 32768;
    UserProblem p{tutorial::online_logsumexp_def(),
                  {{"n_rows", rows}, {"n_cols", cols}},
                  {{"BLOCK_N", 2048}, {"ROWS", 1}},
                  {{"n_rows", 5}, {"n_cols", 9000}}};
    p.bytes = 2.0 * double(rows) * double(cols) + 4.0 * double(rows); // x read, one f32 a row written
    cases.push_back(user_case(p, "tutorial 12"));
  }
  return cases;
}

} // namespace kiln::bench
