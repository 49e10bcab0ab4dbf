// `kiln compare-loads`: FA2 with K loaded through a transposed block pointer (K_TRANSPOSED=1) vs row-major
// K tiles transposed on chip (K_TRANSPOSED=0): results checked against each other (and the reference at
// small sizes), each timed on the GPU at the config the autotuner picks for it, with its shared-memory bank
// conflicts (Nsight Compute, in a child process, where ncu exists), the global-load paths each generated
// kernel uses, and optionally a unified diff of the two generated CUDA sources.
#include "codegen/codegen.h"
#include "kernels/attention/attention_problem.h"
#include "kernels/attention/fa2_fwd.h"
#include "kernels/compare.h"
#include "support/error.h"
#include "tools/attention_runs.h"
#include "tools/cli.h"
#include "tools/decimal_flag.h"
#include "tools/cuda_tools.h"
#include "tools/line_diff.h"
#include "tools/ncu_metrics.h"

#include <llvm/Support/FileSystem.h>

#include <llvm/ADT/StringRef.h>

#include <algorithm>
#include <regex>

namespace kiln::cli {
namespace {

namespace cl = llvm::cl;

cl::SubCommand compare_sub("compare-loads",
                           "Compare FA2's two K load paths: results, timing, load code, diff");
cl::OptionCategory& cat = kiln_category();
DecimalFlag<int64_t> seq("seq", cl::desc("Sequence length (queries and keys)"), cl::Required,
                     cl::sub(compare_sub), cl::cat(cat));
DecimalFlag<int64_t> head_dim("head-dim", cl::desc("Head dim D"), cl::Required, cl::sub(compare_sub),
                          cl::cat(cat));
DecimalFlag<int64_t> batch("batch", cl::desc("Batch size (default 1)"), cl::init(1), cl::sub(compare_sub),
                       cl::cat(cat));
DecimalFlag<int64_t> heads("heads", cl::desc("Heads (default 1)"), cl::init(1), cl::sub(compare_sub),
                       cl::cat(cat));
cl::opt<std::string> dtype("dtype", cl::desc("f16 | bf16 | f32 (default f16)"), cl::init("f16"),
                           cl::sub(compare_sub), cl::cat(cat));
cl::opt<std::string> causal("causal", cl::desc("none | top-left | bottom-right (default none)"),
                            cl::init("none"), cl::sub(compare_sub), cl::cat(cat));
cl::opt<std::string> arch("arch", cl::desc("Arch to generate for (default: this GPU's, else sm_90a)"),
                          cl::sub(compare_sub), cl::cat(cat));
cl::opt<bool> diff("diff", cl::desc("Print a unified diff of the two generated CUDA sources"),
                   cl::sub(compare_sub), cl::cat(cat));
cl::opt<bool> interpret("interpret", cl::desc("Run both in the CPU interpreter (no timing)"),
                        cl::sub(compare_sub), cl::cat(cat));
DecimalFlag<int> reps("reps", cl::desc("Timed launches per variant (default 20)"), cl::init(20),
                  cl::sub(compare_sub), cl::cat(cat));
cl::opt<bool> no_profile("no-profile",
                         cl::desc("Skip the shared-memory bank-conflict count (taken with ncu where it exists)"),
                         cl::sub(compare_sub), cl::cat(cat));
// What the profiled child process runs: one variant (K_TRANSPOSED = the value), launched once.
DecimalFlag<int> only_variant("only-variant", cl::Hidden, cl::init(-1), cl::sub(compare_sub), cl::cat(cat));

// The global-memory load paths of a generated kernel, read off its source: block copies into shared
// memory (cp.async in 16-byte chunks on the aligned path, element by element otherwise) and block loads
// into registers (one element per access).
std::string describe_loads(const GeneratedKernel& g) {
  // One line per load site (call site, tile, element type), with how many places issue its copies
  // (prologue, steady state and drain of a pipelined loop each issue one).
  const std::regex copy_re(R"(// (\S+) -> shared \[(\d+) x (\d+)\] ([\w:]+))");
  std::vector<std::pair<std::string, int>> sites;
  for (auto it = std::sregex_iterator(g.source.begin(), g.source.end(), copy_re);
       it != std::sregex_iterator(); ++it) {
    const std::smatch& m = *it;
    std::string type = m[4].str();
    if (type.rfind("kiln::", 0) == 0)
      type = type.substr(6);
    const int bytes = type == "f16" || type == "bf16" ? 2 : type == "double" ? 8 : 4;
    std::string line =
        fmt::format("{} -> shared [{} x {}] {}: cp.async 16-byte vectors ({} elements) when aligned, "
                    "element-wise otherwise",
                    m[1].str(), m[2].str(), m[3].str(), type, 16 / bytes);
    auto found = std::find_if(sites.begin(), sites.end(), [&](const auto& s) { return s.first == line; });
    if (found == sites.end())
      sites.emplace_back(line, 1);
    else
      ++found->second;
  }
  std::string out;
  for (const auto& [line, n] : sites)
    out += fmt::format("    {} ({} issue site{})\n", line, n, n == 1 ? "" : "s");
  size_t register_loads = 0;
  const std::regex reg_load_re(R"(\[r\] = \(.*\) \? \w+\.base\[)");
  for (auto it = std::sregex_iterator(g.source.begin(), g.source.end(), reg_load_re);
       it != std::sregex_iterator(); ++it)
    ++register_loads;
  out += fmt::format("    block loads into registers (one element per access): {}; cp.async pipelining: {}\n",
                     register_loads,
                     g.source.find("cp_async_wait<") != std::string::npos ? "yes (multi-stage ring)" : "no");
  return out;
}

// This command again with the same problem, running only K_TRANSPOSED = `variant` once: what ncu profiles.
std::vector<std::string> variant_command(int variant) {
  static int anchor;
  return {llvm::sys::fs::getMainExecutable(nullptr, &anchor),
          "compare-loads",
          "--seq=" + std::to_string(seq),
          "--head-dim=" + std::to_string(head_dim),
          "--batch=" + std::to_string(batch),
          "--heads=" + std::to_string(heads),
          "--dtype=" + std::string(dtype),
          "--causal=" + std::string(causal),
          "--no-profile",
          "--only-variant=" + std::to_string(variant)};
}

// "shared-memory bank conflicts: ..." for one variant, measured by ncu in a child process, or why not.
std::string bank_conflicts_line(int variant) {
  const std::string ncu = find_cuda_tool("ncu");
  if (ncu.empty())
    return "shared-memory bank conflicts: not measured (Nsight Compute's ncu not found on PATH, $CUDA_HOME/bin "
           "or /usr/local/cuda/bin)";
  const std::vector<std::string> metrics = {kSharedBankConflicts, kSharedWavefronts};
  const ToolOutput r = run_cuda_tool(ncu, ncu_arguments(metrics, "fa2_fwd", variant_command(variant)), 600);
  if (r.rc != 0) {
    std::string tail = r.output.size() > 600 ? r.output.substr(r.output.size() - 600) : r.output;
    return fmt::format("shared-memory bank conflicts: not measured (ncu exited with {}{}): {}", r.rc,
                       r.error.empty() ? "" : ", " + r.error, tail);
  }
  try {
    const std::map<std::string, double> v = parse_ncu_csv(r.output, metrics);
    const double conflicts = v.at(kSharedBankConflicts), wavefronts = v.at(kSharedWavefronts);
    return fmt::format("shared-memory bank conflicts: {:.0f} over {:.0f} shared wavefronts ({:.1f} %, ncu)",
                       conflicts, wavefronts, wavefronts > 0 ? 100.0 * conflicts / wavefronts : 0.0);
  } catch (const Error& e) {
    return std::string("shared-memory bank conflicts: not measured: ") + e.what();
  }
}

// The profiled child: one variant at the config the tuning cache remembers (never tuning: the parent tuned
// it already, and a tuning launch would be the one ncu profiles), launched once.
int run_one_variant(const AttentionProblem& problem) {
  AttentionProblem p = problem;
  p.k_transposed = only_variant != 0;
  const AttentionInputs in = make_inputs(p, 3, 1.0);
  const Config config = autotuned_launch(p, in, rt::AutotuneMode::Cached).config;
  time_fa2_on_gpu(p, config, in, 0, 1);
  return 0;
}

int run_compare_loads(const KernelRegistry& /*kernels: runs kiln's own FA2*/) {
  AttentionProblem p;
  p.B = batch, p.H = heads, p.H_KV = heads, p.N_Q = seq, p.N_K = seq, p.D = head_dim;
  p.dtype = parse_attention_dtype(dtype, "--dtype");
  p.causal = parse_causal(causal, "--causal");
  check_attention_problem(p);
  const std::string target_arch = arch.empty() ? default_arch() : std::string(arch);
  const Target target = Target::parse(target_arch);
  const Executor executor = choose_executor(interpret);
  if (only_variant >= 0)
    return run_one_variant(p);

  AttentionProblem pt = p, pr = p;
  pt.k_transposed = true;
  pr.k_transposed = false;
  const AttentionInputs in = make_inputs(p, 3, 1.0);
  llvm::outs() << fmt::format("FA2 {} on {}\n", p.str(),
                              executor == Executor::Gpu ? "the GPU" : "the interpreter");
  // On the GPU each variant runs the config the autotuner picks for it (as attention::forward would), so
  // that the comparison is of the two load paths at their best, not at one config that may suit one of them.
  Config ct = default_fa2_config(pt), cr = default_fa2_config(pr);
  if (executor == Executor::Gpu)
    for (auto [problem, config] : {std::pair{&pt, &ct}, std::pair{&pr, &cr}}) {
      const TunedLaunch t = autotuned_launch(*problem, in);
      *config = t.config;
      llvm::outs() << fmt::format("K_TRANSPOSED={}: {}\n", problem->k_transposed ? 1 : 0,
                                  autotuned_source(t.result->source));
    }
  const GeneratedKernel gt = generate_cuda(build_fa2_fwd(ct), target),
                        gr = generate_cuda(build_fa2_fwd(cr), target);
  const AttentionResult rt_ = run_fa2_interpreted(pt, ct, in, executor);
  const AttentionResult rr = run_fa2_interpreted(pr, cr, in, executor);

  bool ok = true;
  const double tol = tolerance(p.dtype);
  const bool identical = rt_.o == rr.o && rt_.lse == rr.lse;
  const Comparison between = compare_to_reference(rr.o, rt_.o);
  llvm::outs() << fmt::format("K_TRANSPOSED=1 vs 0: {} ({})\n",
                              identical ? "bitwise identical" : between.str(),
                              identical || between.ok(tol) ? "ok" : "FAIL");
  ok &= identical || between.ok(tol);
  const double work = static_cast<double>(p.B * p.H) * static_cast<double>(p.N_Q) *
                      static_cast<double>(p.N_K) * static_cast<double>(p.D);
  if (work <= double(1 << 28)) {
    const AttentionResult ref = reference(p, in);
    for (const auto& [name, r] : {std::pair{"K_TRANSPOSED=1", &rt_}, std::pair{"K_TRANSPOSED=0", &rr}}) {
      const Comparison o = compare_to_reference(r->o, ref.o), l = compare_to_reference(r->lse, ref.lse);
      const bool good = o.ok(tol) && l.ok(tol);
      llvm::outs() << fmt::format("{} vs reference: O {}, LSE {} (tolerance {:.1e}) {}\n", name, o.str(),
                                  l.str(), tol, good ? "ok" : "FAIL");
      ok &= good;
    }
  } else {
    llvm::outs() << "reference check skipped (B*H*N*N*D above 2^28)\n";
  }

  for (const auto& [name, config, g] :
       {std::tuple{"K_TRANSPOSED=1", &ct, &gt}, std::tuple{"K_TRANSPOSED=0", &cr, &gr}}) {
    llvm::outs() << fmt::format("{} ({}), generated for {}:\n", name, config->str(), target.arch());
    llvm::outs() << describe_loads(*g);
    if (executor == Executor::Gpu) {
      const AttentionProblem& pp = config == &ct ? pt : pr;
      const GpuTiming t = time_fa2_on_gpu(pp, *config, in, 3, reps);
      llvm::outs() << fmt::format(
          "    time: median {:.4f} ms, min {:.4f}, max {:.4f} over {} runs ({:.1f} TFLOP/s)\n", t.median_ms,
          t.min_ms, t.max_ms, t.reps, attention_flops(p) / (t.median_ms * 1e-3) / 1e12);
      if (!no_profile)
        llvm::outs() << "    " << bank_conflicts_line(pp.k_transposed ? 1 : 0) << "\n";
    }
  }
  if (executor != Executor::Gpu)
    llvm::outs() << "timing skipped: the interpreter is not timed (run without --interpret on a GPU)\n";
  if (diff)
    llvm::outs() << unified_line_diff(gt.source, gr.source, "fa2_fwd K_TRANSPOSED=1",
                                      "fa2_fwd K_TRANSPOSED=0");
  return ok ? 0 : 1;
}

} // namespace

Command compare_loads_command() { return {&compare_sub, run_compare_loads}; }

} // namespace kiln::cli
