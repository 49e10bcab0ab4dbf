#include "kernels/matmul/matmul_launch.h"

#include "kernels/dtype_param.h"
#include "kernels/matmul/matmul_program.h"
#include "kernels/matmul/matmul_split_k.h"

#include <fmt/format.h>

#include <limits>

namespace kiln {

namespace {

constexpr int64_t kMaxSplitK = 4; // the largest SPLIT_K of matmul_split_k's space: the workspace's size

SizeArgs matmul_sizes(const MatmulProblem& p) { return {{"M", p.M}, {"N", p.N}, {"K", p.K}}; }

size_t element_bytes(const MatmulProblem& p) { return static_cast<size_t>(dtype_bytes(p.dtype)); }

MatmulStep tuned_step(KernelTuner& tuner, const KernelDef& def, const Config& base, const SizeArgs& sizes,
                      std::vector<LaunchArg> args, const std::vector<OutputArg>& outputs, TuneOptions tune,
                      double flops) {
  tune.flops = flops;
  TunedLaunch t = tuner.select(def, base, sizes, args, outputs, tune);
  std::optional<double> ms;
  if (t.result->best)
    ms = t.result->best_ms;
  return MatmulStep{def.name, t.config, t.kernel, t.grid, std::move(args), ms};
}

} // namespace

void MatmulPlan::launch(const rt::Stream& stream) const {
  for (const MatmulStep& s : steps)
    s.kernel->launch(s.grid, s.args, stream);
}

std::string MatmulPlan::str() const {
  if (steps.size() == 1)
    return steps[0].config.str();
  std::string out = "split-K:";
  for (const MatmulStep& s : steps)
    out += fmt::format("{} {} {}", out.size() > 8 ? " +" : "", s.kernel_name, s.config.str());
  return out;
}

bool split_k_worth_tuning(const MatmulProblem& p, int sm_count) {
  const int64_t tiles = ((p.M + 127) / 128) * ((p.N + 127) / 128);
  const int64_t max_rows = std::numeric_limits<int32_t>::max() / kMaxSplitK;
  return tiles < sm_count && p.K >= 16 * 64 && p.M <= max_rows;
}

Config default_split_k_config(const MatmulProblem& p) {
  Config c = matmul_split_k_def().default_config();
  const Config plain = default_matmul_config(p);
  for (const char* name : {"DTYPE", "TF32", "A_COL_MAJOR", "B_COL_MAJOR"})
    c.set(name, plain.get(name));
  c.set("BLOCK_K", 64).set("MIN_BLOCKS_PER_SM", 1);
  return c;
}

Config default_split_k_reduce_config(const MatmulProblem& p, int64_t split_k) {
  Config c = matmul_split_k_reduce_def().default_config();
  c.set("DTYPE", dtype_param(p.dtype, "matmul_split_k_reduce")).set("SPLIT_K", split_k);
  return c;
}

std::vector<LaunchArg> matmul_args(const MatmulProblem& p, const MatmulStrides& s, const MatmulPointers& ptrs) {
  return {LaunchArg::pointer(ptrs.a), LaunchArg::pointer(ptrs.b), LaunchArg::pointer(ptrs.c),
          LaunchArg::of_int(p.M),     LaunchArg::of_int(p.N),     LaunchArg::of_int(p.K),
          LaunchArg::of_int(s.am),    LaunchArg::of_int(s.ak),    LaunchArg::of_int(s.bk),
          LaunchArg::of_int(s.bn),    LaunchArg::of_int(s.cm),    LaunchArg::of_int(s.cn)};
}

std::vector<LaunchArg> matmul_split_k_args(const MatmulProblem& p, const MatmulStrides& s,
                                           const MatmulPointers& ptrs, uint64_t workspace) {
  return {LaunchArg::pointer(ptrs.a), LaunchArg::pointer(ptrs.b), LaunchArg::pointer(workspace),
          LaunchArg::of_int(p.M),     LaunchArg::of_int(p.N),     LaunchArg::of_int(p.K),
          LaunchArg::of_int(s.am),    LaunchArg::of_int(s.ak),    LaunchArg::of_int(s.bk),
          LaunchArg::of_int(s.bn)};
}

std::vector<LaunchArg> matmul_split_k_reduce_args(const MatmulProblem& p, const MatmulStrides& s,
                                                  const MatmulPointers& ptrs, uint64_t workspace) {
  return {LaunchArg::pointer(workspace), LaunchArg::pointer(ptrs.c), LaunchArg::of_int(p.M),
          LaunchArg::of_int(p.N),        LaunchArg::of_int(s.cm),    LaunchArg::of_int(s.cn)};
}

MatmulPlan plan_matmul(KernelTuner& tuner, const MatmulProblem& p, const MatmulStrides& strides,
                       const MatmulPointers& ptrs, const MatmulPlanOptions& options) {
  const SizeArgs sizes = matmul_sizes(p);
  const double flops = 2.0 * double(p.M) * double(p.N) * double(p.K);
  // C's extent: its last element's offset, plus one.
  const size_t c_bytes = static_cast<size_t>((p.M - 1) * strides.cm + (p.N - 1) * strides.cn + 1) * element_bytes(p);
  MatmulPlan plan;
  plan.steps.push_back(tuned_step(tuner, matmul_def(), default_matmul_config(p), sizes, matmul_args(p, strides, ptrs),
                                  {{2, c_bytes, 0}}, options.tune, flops));
  if (!options.allow_split_k || !split_k_worth_tuning(p, rt::current_device().sm_count))
    return plan;

  const size_t w_bytes = static_cast<size_t>(kMaxSplitK * p.M * p.N) * sizeof(float);
  auto workspace = std::make_shared<rt::DeviceBuffer>(w_bytes);
  MatmulStep partial = tuned_step(tuner, matmul_split_k_def(), default_split_k_config(p), sizes,
                                  matmul_split_k_args(p, strides, ptrs, workspace->ptr()), {{2, w_bytes, 0}},
                                  options.tune, flops);
  const int64_t split_k = partial.config.get("SPLIT_K");
  MatmulStep reduce = tuned_step(tuner, matmul_split_k_reduce_def(), default_split_k_reduce_config(p, split_k),
                                 {{"M", p.M}, {"N", p.N}},
                                 matmul_split_k_reduce_args(p, strides, ptrs, workspace->ptr()), {{1, c_bytes, 0}},
                                 options.tune, 0);
  const MatmulStep& plain = plan.steps[0];
  if (plain.ms && partial.ms && reduce.ms && *partial.ms + *reduce.ms < *plain.ms) {
    plan.steps = {std::move(partial), std::move(reduce)};
    plan.workspace = std::move(workspace);
  }
  return plan;
}

} // namespace kiln
