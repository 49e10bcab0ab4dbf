// `kiln model KERNEL --shape ...`: the roofline model of analysis/perf_model.h for one launch: FLOPs and
// global bytes per program and in total, operational intensity, the predicted time against peak rates and
// the bound; with --measure, the measured time beside it (GPU; any kernel, on random inputs laid out by its
// launch plan, analysis/launch_plan.h; fa2_fwd on attention inputs).
#include "analysis/perf_model.h"
#include "kernels/attention/attention_problem.h"
#include "kernels/dtype_param.h"
#include "runtime/device.h"
#include "runtime/timing.h"
#include "support/error.h"
#include "tools/attention_runs.h"
#include "tools/cli.h"
#include "tools/kernel_problem.h"

#include <llvm/Support/FormatVariadic.h>
#include <llvm/Support/JSON.h>

namespace kiln::cli {
namespace {

namespace cl = llvm::cl;

cl::SubCommand model_sub("model",
                         "Roofline model of a kernel launch from its IR: FLOPs, bytes, intensity, bound");
cl::opt<std::string> kernel_name(cl::Positional, cl::Required, cl::desc("<kernel>"), cl::sub(model_sub),
                                 cl::cat(kiln_category()));
cl::list<std::string> shape("shape",
                            cl::desc("Size arguments: NAME=VALUE,... (see `kiln list` for each kernel's)"),
                            cl::value_desc("NAME=V,..."), cl::sub(model_sub), cl::cat(kiln_category()));
cl::list<std::string> sets("set", cl::desc("Override a parameter (or give a size): NAME=VALUE"),
                           cl::value_desc("NAME=VALUE"), cl::sub(model_sub), cl::cat(kiln_category()));
cl::opt<double> peak_tflops(
    "peak-tflops",
    cl::desc("Peak dense tensor-core rate in TFLOP/s (default: from the GPU, else 989, H100 SXM f16)"),
    cl::init(0), cl::sub(model_sub), cl::cat(kiln_category()));
cl::opt<double>
    peak_gbps("peak-gbps",
              cl::desc("Peak DRAM bandwidth in GB/s (default: from the GPU, else 3350, H100 SXM)"),
              cl::init(0), cl::sub(model_sub), cl::cat(kiln_category()));
cl::opt<bool> measure("measure",
                      cl::desc("Also time the kernel on the GPU (median of 20 launches on random inputs)"),
                      cl::sub(model_sub), cl::cat(kiln_category()));
cl::opt<bool> json("json", cl::desc("Machine-readable output"), cl::sub(model_sub), cl::cat(kiln_category()));

// The current device's nominal rates, or H100 SXM's where there is no GPU.
rt::PeakRates device_peaks() {
  if (!rt::driver_available() || rt::device_count() == 0)
    return rt::PeakRates{989, 3350, "H100 SXM defaults"};
  return rt::nominal_peak_rates(rt::current_device());
}

// The kernel launched `reps` times on random inputs laid out by its launch plan; the median time in ms.
double measure_ms(const KernelProblem& problem, const Kernel& k, const Grid& grid) {
  const LaunchPlan plan = plan_for(problem, problem.config);
  require_gpu("--measure times the kernel on the GPU");
  DeviceInputs inputs = upload_random_inputs(plan, 1);
  std::shared_ptr<JitKernel> kernel = JitKernel::compile(k);
  return rt::time_kernel_ms([&](rt::Stream& stream) { kernel->launch(grid, inputs.args, stream); }, 3, 20);
}

// fa2_fwd keeps its attention harness: the problem read back from the sizes and the config, checked as
// kiln::attention::forward checks it, on inputs shaped as attention's.
double measure_fa2_ms(const KernelProblem& problem, const Config& config) {
  const SizeArgs& s = problem.sizes;
  AttentionProblem p;
  p.B = s.at("B"), p.H = s.at("H"), p.H_KV = s.at("H_KV");
  p.N_Q = s.at("N_Q"), p.N_K = s.at("N_K"), p.D = s.at("D");
  p.dtype = dtype_from_param(config.get("DTYPE"), "fa2_fwd");
  p.causal = static_cast<int>(config.get("CAUSAL"));
  p.k_transposed = config.get("K_TRANSPOSED") != 0;
  p.tf32 = config.get("TF32") != 0;
  check_attention_problem(p);
  check_attention_config(p, config);
  require_gpu("--measure times the kernel on the GPU");
  return time_fa2_on_gpu(p, config, make_inputs(p, 1, 1.0), 3, 20).median_ms;
}

int run_model(const KernelRegistry& kernels) {
  const KernelDef& def = kernels.find(kernel_name);
  const KernelProblem problem = parse_kernel_problem(def, shape_and_set_assignments(shape, sets));
  const Config& config = problem.config;
  ScalarArgs scalars(problem.values.begin(), problem.values.end());

  const Kernel k = def.build(config);
  const Grid grid = def.grid(config, problem.sizes);
  check_grid(def.name, grid);
  const CostEstimate e = estimate_cost(k, grid, scalars);

  rt::PeakRates peaks = device_peaks();
  if (peak_tflops.getNumOccurrences())
    peaks.tflops = peak_tflops, peaks.from = "flags";
  if (peak_gbps.getNumOccurrences())
    peaks.gbps = peak_gbps, peaks.from = "flags";
  const Roofline r = roofline(e, peaks.tflops, peaks.gbps);

  double measured_ms = -1;
  if (measure)
    measured_ms = def.name == "fa2_fwd" ? measure_fa2_ms(problem, config) : measure_ms(problem, k, grid);

  const Cost per = e.per_program();
  if (json) {
    llvm::json::Object o{{"kernel", def.name},
                         {"config", config.str()},
                         {"grid", llvm::json::Array{grid[0], grid[1], grid[2]}},
                         {"programs", e.programs},
                         {"programs_evaluated", e.programs_evaluated},
                         {"matrix_flops", e.total.matrix_flops},
                         {"vector_flops", e.total.vector_flops},
                         {"bytes_loaded", e.total.bytes_loaded},
                         {"bytes_stored", e.total.bytes_stored},
                         {"intensity_flop_per_byte", e.intensity()},
                         {"peak_tflops", peaks.tflops},
                         {"peak_gbps", peaks.gbps},
                         {"peaks_from", peaks.from},
                         {"compute_ms", r.compute_s * 1e3},
                         {"memory_ms", r.memory_s * 1e3},
                         {"predicted_ms", r.time_s() * 1e3},
                         {"bound", r.compute_bound() ? "compute" : "memory"}};
    if (measured_ms >= 0)
      o["measured_ms"] = measured_ms;
    llvm::outs() << llvm::formatv("{0:2}", llvm::json::Value(std::move(o))) << "\n";
    return 0;
  }
  auto g = [](double v) { return fmt::format("{:.4g}", v); };
  llvm::outs() << fmt::format("{} ({})\n", def.name, config.str());
  llvm::outs() << fmt::format("grid ({}, {}, {}) = {} programs{}\n", grid[0], grid[1], grid[2], e.programs,
                              e.programs_evaluated != e.programs
                                  ? fmt::format(" ({} evaluated, totals scaled)", e.programs_evaluated)
                                  : "");
  llvm::outs() << fmt::format("                 {:>14} {:>14}\n", "per program", "total");
  llvm::outs() << fmt::format("matrix FLOPs     {:>14} {:>14}\n", g(per.matrix_flops),
                              g(e.total.matrix_flops));
  llvm::outs() << fmt::format("vector FLOPs     {:>14} {:>14}\n", g(per.vector_flops),
                              g(e.total.vector_flops));
  llvm::outs() << fmt::format("bytes loaded     {:>14} {:>14}\n", g(per.bytes_loaded),
                              g(e.total.bytes_loaded));
  llvm::outs() << fmt::format("bytes stored     {:>14} {:>14}\n", g(per.bytes_stored),
                              g(e.total.bytes_stored));
  llvm::outs() << fmt::format("intensity        {:.2f} FLOP/byte (ridge point {:.1f})\n", e.intensity(),
                              r.ridge_intensity());
  llvm::outs() << fmt::format("peaks            {:.0f} TFLOP/s, {:.0f} GB/s ({})\n", peaks.tflops, peaks.gbps,
                              peaks.from);
  llvm::outs() << fmt::format("roofline         compute {}, memory {} -> predicted {} ({}-bound)\n",
                              human_seconds(r.compute_s), human_seconds(r.memory_s),
                              human_seconds(r.time_s()), r.compute_bound() ? "compute" : "memory");
  if (measured_ms >= 0)
    llvm::outs() << fmt::format("measured         {} ({:.0f}% of the roofline prediction's speed)\n",
                                human_seconds(measured_ms * 1e-3), 100.0 * r.time_s() / (measured_ms * 1e-3));
  llvm::outs()
      << "note: bytes count every program's global accesses with no cache reuse (an upper bound on DRAM "
         "traffic); only matrix FLOPs meet the tensor-core peak. See analysis/perf_model.h.\n";
  return 0;
}

} // namespace

Command model_command() { return {&model_sub, run_model}; }

} // namespace kiln::cli
