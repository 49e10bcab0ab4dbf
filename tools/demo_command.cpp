// `kiln demo`: FlashAttention-2 forward checked against the double-precision reference in the interpreter
// (causal none and top-left), the kernel's IR, then, where a GPU exists, the same checks on the GPU and a
// timed run at B=4, H=16, N=4096, D=64. Exits non-zero when any check fails.
#include "dsl/printer.h"
#include "kernels/attention/attention_problem.h"
#include "kernels/attention/fa2_fwd.h"
#include "kernels/compare.h"
#include "runtime/device.h"
#include "tools/attention_runs.h"
#include "tools/cli.h"

#include <chrono>

namespace kiln::cli {
namespace {

namespace cl = llvm::cl;

cl::SubCommand demo_sub("demo", "Run FA2 in the interpreter (and on the GPU where one exists) and check it");
cl::opt<bool> interpret("interpret", cl::desc("Skip the GPU part even where a GPU exists"), cl::sub(demo_sub),
                        cl::cat(kiln_category()));
cl::opt<bool> no_ir("no-ir", cl::desc("Do not print the kernel's IR"), cl::sub(demo_sub),
                    cl::cat(kiln_category()));

// Runs one check and prints its line; true when O and LSE are within the dtype's tolerance.
bool check_fa2(const AttentionProblem& p, Executor executor, const char* where) {
  const Config config = default_fa2_config(p);
  const AttentionInputs in = make_inputs(p, 11 + static_cast<uint64_t>(p.causal), 1.0);
  const AttentionResult got = run_fa2_interpreted(p, config, in, executor);
  const AttentionResult ref = reference(p, in);
  const double tol = tolerance(p.dtype);
  const Comparison o = compare_to_reference(got.o, ref.o), lse = compare_to_reference(got.lse, ref.lse);
  const bool ok = o.ok(tol) && lse.ok(tol);
  llvm::outs() << fmt::format(
      "  {:<11} B={} H={} N={} D={} {} causal={:<9} O: {}  LSE: {}  (tolerance {:.1e})  {}\n", where, p.B,
      p.H, p.N_Q, p.D, dtype_name(p.dtype), causal_name(p.causal), o.str(), lse.str(), tol,
      ok ? "OK" : "FAIL");
  llvm::outs().flush();
  return ok;
}

AttentionProblem demo_problem(int causal) {
  AttentionProblem p;
  p.B = 1, p.H = 2, p.H_KV = 2, p.N_Q = 128, p.N_K = 128, p.D = 64;
  p.dtype = DType::f16;
  p.causal = causal;
  return p;
}

int run_demo(const KernelRegistry& /*kernels: runs kiln's own FA2*/) {
  bool ok = true;
  llvm::outs() << "FlashAttention-2 forward vs the double-precision reference, in the CPU interpreter:\n";
  for (int causal : {0, 1})
    ok &= check_fa2(demo_problem(causal), Executor::Interpreter, "interpreter");

  {
    // The interpreter's speed figure (issue: FA2 at B=1, H=2, N=256, D=64 in under 2 s on one core).
    AttentionProblem p = demo_problem(0);
    p.N_Q = p.N_K = 256;
    const AttentionInputs in = make_inputs(p, 11, 1.0);
    const auto t0 = std::chrono::steady_clock::now();
    (void)run_fa2_interpreted(p, default_fa2_config(p), in, Executor::Interpreter);
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    llvm::outs() << fmt::format("  interpreter speed: {} in {:.3f} s (one core)\n", p.str(), s);
  }

  if (!no_ir) {
    llvm::outs() << "\nThe kernel's IR (" << default_fa2_config(demo_problem(0)).str() << "):\n";
    llvm::outs() << print_kernel(build_fa2_fwd(default_fa2_config(demo_problem(0))));
  }

  std::string why;
  if (interpret || interpret_requested()) {
    llvm::outs() << "\nGPU: skipped (--interpret or KILN_INTERPRET=1)\n";
  } else if (!rt::driver_available(&why) || rt::device_count() == 0) {
    llvm::outs() << "\nGPU: none found, so the GPU checks and the timed run are skipped ("
                 << (why.empty() ? std::string("the driver reports no CUDA device") : why) << ")\n";
  } else {
    llvm::outs() << "\nOn the GPU (" << rt::current_device().name << ", " << rt::current_device().arch
                 << "):\n";
    for (int causal : {0, 1})
      ok &= check_fa2(demo_problem(causal), Executor::Gpu, "GPU");
    AttentionProblem big;
    big.B = 4, big.H = 16, big.H_KV = 16, big.N_Q = 4096, big.N_K = 4096, big.D = 64;
    big.dtype = DType::f16;
    const Config config = default_fa2_config(big);
    const GpuTiming t = time_fa2_on_gpu(big, config, make_inputs(big, 5, 1.0), 3, 20);
    llvm::outs() << fmt::format(
        "  timed: {} ({}) median {:.3f} ms (min {:.3f}, max {:.3f}) = {:.1f} TFLOP/s\n", big.str(),
        config.str(), t.median_ms, t.min_ms, t.max_ms, attention_flops(big) / (t.median_ms * 1e-3) / 1e12);
  }
  llvm::outs() << (ok ? "\nall checks OK\n" : "\nSOME CHECKS FAILED\n");
  return ok ? 0 : 1;
}

} // namespace

Command demo_command() { return {&demo_sub, run_demo}; }

} // namespace kiln::cli
