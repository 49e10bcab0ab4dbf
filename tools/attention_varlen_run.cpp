#include "tools/attention_varlen_run.h"

#include "kernels/attention/attention_tolerance.h"
#include "kernels/attention/attention_varlen_api.h"
#include "kernels/attention/attention_varlen_bwd_problem.h"
#include "kernels/attention/attention_varlen_mods.h"
#include "kernels/attention/fa2_fwd_varlen.h"
#include "kernels/compare.h"
#include "runtime/device.h"
#include "support/error.h"
#include "tools/attention_runs.h"
#include "tools/attention_varlen_device.h"
#include "tools/cli.h"
#include "tools/npy_outputs.h"

#include <llvm/Support/raw_ostream.h>

#include <charconv>

namespace kiln::cli {

namespace {

int64_t parse_length(std::string_view text, const char* flag, const std::string& entry) {
  int64_t v = -1;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v < 0)
    fail("{}: '{}' is not a sequence length; expected N or NQ:NK with lengths >= 0 in base 10 (e.g. "
         "0,1,17:30,300)",
         flag, entry);
  return v;
}

} // namespace

void parse_varlen_lengths(const std::string& text, const char* flag, VarlenProblem& p) {
  p.seqlens_q.clear();
  p.seqlens_k.clear();
  if (text.empty())
    fail("{} is empty; expected one length (N or NQ:NK) per sequence, comma-separated", flag);
  size_t start = 0;
  while (start <= text.size()) {
    const size_t comma = std::min(text.find(',', start), text.size());
    const std::string entry = text.substr(start, comma - start);
    const size_t colon = entry.find(':');
    const int64_t nq = parse_length(std::string_view(entry).substr(0, colon), flag, entry);
    const int64_t nk = colon == std::string::npos
                           ? nq
                           : parse_length(std::string_view(entry).substr(colon + 1), flag, entry);
    p.seqlens_q.push_back(nq);
    p.seqlens_k.push_back(nk);
    start = comma + 1;
  }
}

namespace {

int run_varlen_backward(const VarlenRun& r) {
  const VarlenProblem& p = r.problem;
  if (!r.overrides.empty())
    fail("--set applies to the forward's kernel; --varlen --backward runs the backward's own configs");
  const AttentionInputs inputs = make_varlen_inputs(p, r.seed, 1.0);
  const HostBuffer dout = make_varlen_dout(p, r.seed + 1, 1.0);
  // On the GPU without mods, through the API as a training step calls it: forward_varlen's O and LSE, then
  // backward_varlen, tuned as it tunes (with --nondeterministic the faster of the two pairs). In the interpreter,
  // or with mods, the default configs over the O and LSE of the double reference (with the mods).
  const bool through_api = r.executor == Executor::Gpu && r.mods.empty();
  std::string configs = "configs as kiln::attention::backward_varlen picks them";
  if (!through_api) {
    const AttentionBwdConfigs c = default_varlen_bwd_configs(p, r.atomic_dq);
    configs = fmt::format("the default configs: dK/dV {}; dQ {}{}", c.dkdv.str(),
                          r.atomic_dq ? "by atomics" : c.dq.str(), r.mods.empty() ? "" : "; mods " + r.mods.name());
  }
  llvm::outs() << fmt::format("fa2 backward varlen {} on {} ({}; {})\n", p.str(),
                              r.executor == Executor::Gpu ? "the GPU" : "the interpreter",
                              r.atomic_dq ? "nondeterministic" : "deterministic", configs);
  std::optional<DeviceVarlen> device;
  AttentionGrads grads;
  if (through_api) {
    device.emplace(p, inputs, &dout);
    device->forward(std::nullopt);
    device->backward(!r.atomic_dq);
    grads = device->gradients();
  } else {
    grads = run_varlen_bwd_with_mods(p, r.mods, r.mod_tensors, default_varlen_bwd_configs(p, r.atomic_dq), inputs,
                                     dout, r.executor);
  }
  bool ok = true;
  if (r.check) {
    const AttentionGrads ref = varlen_reference_backward_with_mods(p, inputs, dout, r.mods, r.mod_tensors);
    const double tol = attention_grad_tolerance(
        p.dtype, p.tf32, max_abs_lse(varlen_reference_with_mods(p, inputs, r.mods, r.mod_tensors)));
    for (const auto& [name, c] : compare_grads(grads, ref)) {
      llvm::outs() << fmt::format("check {}: {} (tolerance {:.1e}) {}\n", name, c.str(), tol,
                                  c.ok(tol) ? "ok" : "FAIL");
      ok = ok && c.ok(tol);
    }
  }
  if (r.bench) { // through the API, as a training step calls it: tuned, the variant as --nondeterministic says
    llvm::outs() << fmt::format("bench: kiln::attention::forward_varlen and backward_varlen ({}), as they tune\n",
                                r.atomic_dq ? "deterministic = false: the faster of the two pairs" : "deterministic");
    const DeviceVarlen& d = *device; // run_varlen refuses --bench with --mod and in the interpreter
    const GpuTiming backward = time_gpu_calls([&] { d.backward(!r.atomic_dq); }, r.reps);
    llvm::outs() << bench_line("backward", backward, 2.5 * p.flops()); // ANCHORS.md: 2.5x the forward
    const GpuTiming step = time_gpu_calls(
        [&] {
          d.forward(std::nullopt);
          d.backward(!r.atomic_dq);
        },
        r.reps);
    llvm::outs() << bench_line("forward+backward", step, 3.5 * p.flops());
  }
  if (!ok) {
    llvm::errs() << program_name()
                 << ": error: the gradients do not match the reference; no output written\n";
    return 1;
  }
  std::vector<std::pair<OutputPath, std::string>> files;
  if (!r.dq_file.empty())
    files.push_back(output_npy("--dq", r.dq_file, r.out_dtype, {p.total_q(), p.H, p.D}, grads.dq));
  if (!r.dk_file.empty())
    files.push_back(output_npy("--dk", r.dk_file, r.out_dtype, {p.total_k(), p.H_KV, p.D}, grads.dk));
  if (!r.dv_file.empty())
    files.push_back(output_npy("--dv", r.dv_file, r.out_dtype, {p.total_k(), p.H_KV, p.D}, grads.dv));
  write_outputs(files);
  return 0;
}

} // namespace

int run_varlen_attention(const VarlenRun& r) {
  const VarlenProblem& p = r.problem;
  check_varlen_problem(p);
  if (r.backward)
    return run_varlen_backward(r);
  Config config = fa2_fwd_varlen_def(r.mods).with_overrides(default_fa2_varlen_config(p), r.overrides);
  check_attention_config(p.shape(), config);
  const AttentionInputs inputs = make_varlen_inputs(p, r.seed, 1.0);

  std::string source = r.overrides.empty() ? "the default config" : "the default config with --set";
  // Mods run at the default config (or --set's), not autotuned, as the dense command line runs them.
  const bool tuned = r.executor == Executor::Gpu && r.overrides.empty() && r.mods.empty();
  if (tuned)
    source = "as kiln::attention::forward_varlen picks it (KILN_AUTOTUNE)";
  if (!r.mods.empty())
    source += "; mods " + r.mods.name() + " (not autotuned)";
  llvm::outs() << fmt::format("fa2_fwd_varlen {} on {} ({})\n", p.str(),
                              r.executor == Executor::Gpu ? "the GPU" : "the interpreter",
                              tuned ? source : config.str() + "; " + source);
  const std::optional<Config> api_config = tuned ? std::nullopt : std::optional<Config>(config);
  std::optional<DeviceVarlen> device; // the API's call on the GPU (without mods)
  if (r.executor == Executor::Gpu && r.mods.empty()) {
    device.emplace(p, inputs);
    device->forward(api_config);
  }
  const AttentionResult result =
      device ? device->outputs() : run_fa2_varlen_with_mods(p, r.mods, r.mod_tensors, config, inputs, r.executor);

  bool ok = true;
  if (r.check) {
    const AttentionResult ref = varlen_reference_with_mods(p, inputs, r.mods, r.mod_tensors);
    const double tol = attention_tolerance(p.dtype, p.tf32, max_abs_lse(ref));
    const Comparison co = compare_to_reference(result.o, ref.o),
                     cl = compare_to_reference(result.lse, ref.lse);
    llvm::outs() << fmt::format("check O:   {} (tolerance {:.1e}) {}\n", co.str(), tol,
                                co.ok(tol) ? "ok" : "FAIL");
    llvm::outs() << fmt::format("check LSE: {} (tolerance {:.1e}) {}\n", cl.str(), tol,
                                cl.ok(tol) ? "ok" : "FAIL");
    ok = co.ok(tol) && cl.ok(tol);
  }
  if (r.bench) // run_varlen refuses --bench with --mod and in the interpreter, so `device` is there
    llvm::outs() << bench_line("", time_gpu_calls([&] { device->forward(api_config); }, r.reps), p.flops());
  if (!ok) {
    llvm::errs() << program_name() << ": error: the result does not match the reference; no output written\n";
    return 1;
  }
  std::vector<std::pair<OutputPath, std::string>> files;
  if (!r.out_file.empty())
    files.push_back(output_npy("--out", r.out_file, r.out_dtype, {p.total_q(), p.H, p.D}, result.o));
  if (!r.lse_file.empty())
    files.push_back(output_npy("--lse", r.lse_file, r.out_dtype, {p.H, p.total_q()}, result.lse));
  write_outputs(files);
  return 0;
}

} // namespace kiln::cli
