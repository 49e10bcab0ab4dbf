// `kiln attention`: FlashAttention-2 forward on given (.npy) or random inputs, in the interpreter or on the
// GPU (with the config the autotuner picks, as kiln::attention::forward, unless --set fixes parameters);
// optionally checked against the double-precision reference and timed. With --backward, the backward pass
// (dQ, dK, dV for a given or random dO; tools/attention_backward.h) instead. With --varlen, packed
// variable-length sequences (tools/attention_varlen_run.h) instead. Outputs are written only after
// the run (and the check) succeeded, as one set: all of them or none (support/output_set.h); their paths
// are checked before the run.
#include "kernels/attention/attention_api.h"
#include "kernels/attention/attention_block_mask.h"
#include "kernels/attention/attention_block_mask_host.h"
#include "kernels/attention/attention_mod_library.h"
#include "kernels/attention/attention_mod_spec.h"
#include "kernels/attention/attention_mods_host.h"
#include "kernels/attention/attention_problem.h"
#include "kernels/attention/attention_tolerance.h"
#include "kernels/attention/fa2_fwd.h"
#include "kernels/compare.h"
#include "support/error.h"
#include "support/npy.h"
#include "support/output_set.h"
#include "tools/attention_backward.h"
#include "tools/attention_runs.h"
#include "tools/attention_varlen_run.h"
#include "tools/cli.h"
#include "tools/decimal_flag.h"
#include "tools/mod_tensor_files.h"
#include "tools/npy_outputs.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string_view>

namespace kiln::cli {
namespace {

namespace cl = llvm::cl;

cl::SubCommand attention_sub("attention", "Run FlashAttention-2 forward on random or .npy inputs");
cl::OptionCategory& cat = kiln_category();
DecimalFlag<int64_t> batch("batch", cl::desc("Batch size B (required unless --varlen)"), cl::sub(attention_sub),
                           cl::cat(cat));
DecimalFlag<int64_t> heads("heads", cl::desc("Query heads H"), cl::Required, cl::sub(attention_sub),
                           cl::cat(cat));
DecimalFlag<int64_t> kv_heads("kv-heads", cl::desc("Key/value heads (default: --heads; fewer for GQA/MQA)"),
                              cl::init(0), cl::sub(attention_sub), cl::cat(cat));
DecimalFlag<int64_t> seq_q("seq-q", cl::desc("Query length N_Q (required unless --varlen)"), cl::sub(attention_sub),
                           cl::cat(cat));
DecimalFlag<int64_t> seq_k("seq-k", cl::desc("Key length N_K (default: --seq-q)"), cl::init(0),
                           cl::sub(attention_sub), cl::cat(cat));
DecimalFlag<int64_t> head_dim("head-dim", cl::desc("Head dim D"), cl::Required, cl::sub(attention_sub),
                              cl::cat(cat));
cl::opt<std::string> dtype("dtype", cl::desc("f16 | bf16 | f32: the dtype the kernel runs in (default f16)"),
                           cl::init("f16"), cl::sub(attention_sub), cl::cat(cat));
cl::opt<std::string> causal("causal", cl::desc("none | top-left | bottom-right (default none)"),
                            cl::init("none"), cl::sub(attention_sub), cl::cat(cat));
cl::opt<std::string> layout("layout", cl::desc("bhsd | bshd: the layout of Q, K, V and O (default bhsd)"),
                            cl::init("bhsd"), cl::sub(attention_sub), cl::cat(cat));
cl::opt<std::string> k_load("k-load",
                            cl::desc("transposed | row-major: how K tiles are loaded (default transposed)"),
                            cl::init("transposed"), cl::sub(attention_sub), cl::cat(cat));
cl::opt<std::string> q_file("q", cl::desc("Q as .npy (with --k and --v)"), cl::value_desc("FILE.npy"),
                            cl::sub(attention_sub), cl::cat(cat));
cl::opt<std::string> k_file("k", cl::desc("K as .npy"), cl::value_desc("FILE.npy"), cl::sub(attention_sub),
                            cl::cat(cat));
cl::opt<std::string> v_file("v", cl::desc("V as .npy"), cl::value_desc("FILE.npy"), cl::sub(attention_sub),
                            cl::cat(cat));
cl::opt<std::string> out_file("out", cl::desc("Write O as .npy (shape follows --layout)"),
                              cl::value_desc("FILE.npy"), cl::sub(attention_sub), cl::cat(cat));
cl::opt<std::string> lse_file("lse", cl::desc("Write LSE [B, H, N_Q] as .npy"), cl::value_desc("FILE.npy"),
                              cl::sub(attention_sub), cl::cat(cat));
cl::opt<std::string> out_dtype("out-dtype",
                               cl::desc("f32 | f16 | f64: dtype of the .npy outputs (default f32)"),
                               cl::init("f32"), cl::sub(attention_sub), cl::cat(cat));
cl::opt<bool> interpret("interpret", cl::desc("Run in the CPU interpreter (also KILN_INTERPRET=1)"),
                        cl::sub(attention_sub), cl::cat(cat));
cl::opt<bool> check("check", cl::desc("Compare with the double-precision reference"), cl::sub(attention_sub),
                    cl::cat(cat));
cl::opt<bool> bench("bench", cl::desc("Time the kernel on the GPU (median of --reps launches)"),
                    cl::sub(attention_sub), cl::cat(cat));
DecimalFlag<int> reps("reps", cl::desc("Timed launches for --bench (default 20)"), cl::init(20),
                      cl::sub(attention_sub), cl::cat(cat));
DecimalFlag<uint64_t> seed("seed", cl::desc("Seed of the random inputs (default 1)"), cl::init(1),
                           cl::sub(attention_sub), cl::cat(cat));
cl::opt<bool>
    backward_pass("backward",
                  cl::desc("Run the backward pass (dQ, dK, dV) instead: --check compares every gradient "
                           "with the double reference, --bench times backward and forward+backward"),
                  cl::sub(attention_sub), cl::cat(cat));
cl::opt<std::string> dout_file("dout",
                               cl::desc("With --backward: dO as .npy, shaped like Q (default: random)"),
                               cl::value_desc("FILE.npy"), cl::sub(attention_sub), cl::cat(cat));
cl::opt<std::string> dq_file("dq", cl::desc("With --backward: write dQ as .npy (Q's shape)"),
                             cl::value_desc("FILE.npy"), cl::sub(attention_sub), cl::cat(cat));
cl::opt<std::string> dk_file("dk", cl::desc("With --backward: write dK as .npy (K's shape)"),
                             cl::value_desc("FILE.npy"), cl::sub(attention_sub), cl::cat(cat));
cl::opt<std::string> dv_file("dv", cl::desc("With --backward: write dV as .npy (V's shape)"),
                             cl::value_desc("FILE.npy"), cl::sub(attention_sub), cl::cat(cat));
cl::opt<bool>
    nondeterministic("nondeterministic",
                     cl::desc("With --backward: allow dQ by f32 atomics (the interpreter runs that variant; "
                              "on the GPU the autotuner picks the faster)"),
                     cl::sub(attention_sub), cl::cat(cat));
cl::opt<bool> exact_masked_v("exact-masked-v",
                             cl::desc("Keys a row does not see contribute nothing to it even when their V holds "
                                      "NaN or inf (slower; docs/guarantees.md)"),
                             cl::sub(attention_sub), cl::cat(cat));
cl::list<std::string>
    mod_specs("mod",
              cl::desc("A score or mask mod of kiln's library (repeatable; kernels/attention/attention_mod_spec.h): "
                       "causal[=top-left|bottom-right], sliding_window=LEFT[,RIGHT], prefix_lm=N, softcap=CAP, "
                       "alibi (the usual slopes); runs the default config (the backward's with --backward), "
                       "which --bench times (with --backward, through kiln::attention::backward with the mods)"),
              cl::value_desc("NAME[=ARGS]"), cl::sub(attention_sub), cl::cat(cat));
cl::list<std::string> mod_tensor_args(
    "mod-tensor",
    cl::desc("A tensor the --mod mods read, from an .npy file (repeatable): a bias, document ids (q_doc, kv_doc), "
             "an expression's own (--mod 'mask=doc:i32[b, q_idx] == doc:i32[b, kv_idx]' --mod-tensor "
             "doc=ids.npy); its shape the file's (extent-1 dims broadcast), its values rounded to the dtype the "
             "mods read it as; dense runs only (not --varlen)"),
    cl::value_desc("NAME=FILE.npy"), cl::sub(attention_sub), cl::cat(cat));
cl::opt<bool> block_mask_flag(
    "block-mask",
    cl::desc("Run over a block mask built from the --mod mask mods and --causal at the config's tiles (BLOCK_M, "
             "BLOCK_N: --set, else the defaults): the forward, and with --backward the backward (at the same "
             "tiles, deterministic), visit only the tiles the mask shows; --bench times them over it"),
    cl::sub(attention_sub), cl::cat(cat));
cl::opt<std::string>
    varlen("varlen",
           cl::desc("Packed variable-length sequences instead of --batch/--seq-q/--seq-k, as "
                    "kiln::attention::forward_varlen runs them: one length per sequence, N (N_Q = N_K) or NQ:NK, "
                    "0 allowed (e.g. 0,1,17:30,300); random inputs, --out writes O [total_q, H, D], --lse LSE "
                    "[H, total_q]; with --backward, --dq [total_q, H, D], --dk and --dv [total_k, H_KV, D]"),
           cl::value_desc("LENS"), cl::sub(attention_sub), cl::cat(cat));
cl::list<std::string> sets("set", cl::desc("Override a kernel parameter: NAME=VALUE (e.g. BLOCK_M=64)"),
                           cl::value_desc("NAME=VALUE"), cl::sub(attention_sub), cl::cat(cat));

// The file's shape for a [B, heads, n, D] tensor in the problem's layout.
std::vector<int64_t> file_shape(const AttentionProblem& p, int64_t h, int64_t n) {
  return p.bshd_layout ? std::vector<int64_t>{p.B, n, h, p.D} : std::vector<int64_t>{p.B, h, n, p.D};
}

// The dtype and shape are checked from the header, before the data is read: a header declaring gigabytes for
// a small problem is refused without reading (or allocating) them.
HostBuffer read_input(const std::string& path, const char* name, const AttentionProblem& p, int64_t h,
                      int64_t n) {
  const std::vector<int64_t> want = file_shape(p, h, n);
  NpyArray a = read_npy(path, [&](const NpyArray& header) {
    if (!header.is_float())
      fail("'{}' ({}): dtype {} ('{}') is not supported for attention inputs; expected float16, float32 or "
           "float64",
           path, name, header.dtype_str(), header.descr());
    if (header.shape != want)
      fail("'{}' ({}): shape {} does not match the problem; expected {} ([{}] with --layout {})", path, name,
           header.shape_str(), shape_text(want), p.bshd_layout ? "B, N, H, D" : "B, H, N, D",
           p.bshd_layout ? "bshd" : "bhsd");
  });
  HostBuffer b(p.dtype, a.numel(), name);
  for (int64_t i = 0; i < a.numel(); ++i)
    b.set(i, round_exactly_to(a.values[static_cast<size_t>(i)], p.dtype));
  return b;
}

// A tensor in logical order [B, heads, n, D] rearranged to the layout's order.
std::vector<double> in_layout(const AttentionProblem& p, int64_t heads, int64_t len,
                              const std::vector<double>& t) {
  if (!p.bshd_layout)
    return t;
  std::vector<double> out(t.size());
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t h = 0; h < heads; ++h)
      for (int64_t n = 0; n < len; ++n)
        for (int64_t d = 0; d < p.D; ++d)
          out[static_cast<size_t>(((b * len + n) * heads + h) * p.D + d)] =
              t[static_cast<size_t>(((b * heads + h) * len + n) * p.D + d)];
  return out;
}

// What a check says of inputs that are not all finite ("" when they are): printed before its comparisons and
// repeated in its failure, so that non-finite mismatches are not read as a fault of the kernel.
// A non-finite V with causal masking and without --exact-masked-v may reach rows that do not see its key (the
// reference selects): the note says so.
std::string nonfinite_inputs_note(const AttentionProblem& p, const std::vector<NamedValues>& inputs) {
  const std::string which = describe_nonfinite(inputs);
  if (which.empty())
    return "";
  std::string note = "the inputs are not all finite: " + which;
  for (const NamedValues& in : inputs)
    if (std::string_view(in.name) == "V" && p.causal != 0 && !p.exact_masked_v &&
        std::any_of(in.values.begin(), in.values.end(), [](double x) { return !std::isfinite(x); }))
      note += "; a NaN or inf in V also reaches causal rows that do not see its key, where the reference has "
              "none (kiln's default, as FlashAttention's; --exact-masked-v selects exactly: docs/guarantees.md)";
  return note;
}

// --backward: the gradients of the problem for dO (--dout or random), checked, timed and written as asked.
// With mods, the forward's O and LSE come from the double reference with the mods and the backward runs on the
// default configs (not autotuned), as `--mod` runs the forward.
// With `block_mask` (--block-mask), over it at its tiles (run_bwd_with_block_mask; timed through the API with
// a block mask made the same way).
int run_backward(const AttentionProblem& p, AttentionInputs inputs, const std::optional<Config>& fwd_config,
                 Executor executor, DType out_dt, const AttentionMods& mods, const ModTensorValues& mod_tensors,
                 const HostBlockMask* block_mask) {
  BackwardRequest r{p, std::move(inputs),
                    dout_file.empty() ? make_dout(p, seed + 1, 1.0)
                                      : read_input(dout_file, "dO", p, p.H, p.N_Q),
                    fwd_config, !nondeterministic, mods, mod_tensors, std::nullopt};
  std::string configs = !mods.empty() ? "the default configs; mods " + mods.name() + " (not autotuned)"
                        : executor == Executor::Gpu ? "configs as kiln::attention::backward picks them"
                                                    : "the default configs";
  if (block_mask) {
    r.block_mask_tiles = std::pair{block_mask->layout.block_m, block_mask->layout.block_n};
    configs = fmt::format("the default configs at the block mask's tiles BLOCK_M={} x BLOCK_N={}{} (not autotuned)",
                          block_mask->layout.block_m, block_mask->layout.block_n,
                          mods.empty() ? "" : "; mods " + mods.name());
  }
  llvm::outs() << fmt::format("fa2 backward {} on {} ({}; {})\n", p.str(),
                              executor == Executor::Gpu ? "the GPU" : "the interpreter",
                              r.deterministic ? "deterministic" : "nondeterministic", configs);
  const AttentionGrads grads =
      block_mask ? run_bwd_with_block_mask(p, mods, mod_tensors, *block_mask,
                                           block_mask_bwd_configs(block_mask->layout, p), r.inputs, r.dout, executor)
      : mods.empty() ? run_attention_backward(r, executor)
                     : run_bwd_with_mods(p, mods, mod_tensors, default_bwd_configs(p, !r.deterministic), r.inputs,
                                         r.dout, executor);

  bool ok = true;
  std::string nonfinite;
  if (check) {
    nonfinite = nonfinite_inputs_note(p, {{"Q", to_doubles(r.inputs.q)},
                                       {"K", to_doubles(r.inputs.k)},
                                       {"V", to_doubles(r.inputs.v)},
                                       {"dO", to_doubles(r.dout)}});
    if (!nonfinite.empty())
      llvm::outs() << "check: " << nonfinite << "\n";
    const AttentionGrads ref = mods.empty() ? reference_backward(p, logical_bwd_tensors(p, r.inputs, r.dout))
                                            : reference_backward_with_mods(p, r.inputs, r.dout, mods, mod_tensors);
    const double tol = attention_grad_tolerance(
        p.dtype, p.tf32,
        mods.empty() ? max_abs_lse(p, r.inputs) : max_abs_lse(reference_with_mods(p, r.inputs, mods, mod_tensors)));
    for (const auto& [name, c] : compare_grads(grads, ref)) {
      llvm::outs() << fmt::format("check {}: {} (tolerance {:.1e}) {}\n", name, c.str(), tol,
                                  c.ok(tol) ? "ok" : "FAIL");
      ok = ok && c.ok(tol);
    }
  }
  if (bench) {
    const BackwardTiming t = time_attention_backward(r, reps);
    const double fwd_flops = attention_flops(p);
    llvm::outs() << bench_line("backward", t.backward, 2.5 * fwd_flops); // ANCHORS.md: 2.5x the forward
    llvm::outs() << bench_line("forward+backward", t.step, 3.5 * fwd_flops);
  }
  if (!ok) {
    llvm::errs() << program_name() << ": error: the gradients do not match the reference; no output written"
                 << (nonfinite.empty() ? "" : " (" + nonfinite + ")") << "\n";
    return 1;
  }
  std::vector<std::pair<OutputPath, std::string>> files;
  if (!dq_file.empty())
    files.push_back(
        output_npy("--dq", dq_file, out_dt, file_shape(p, p.H, p.N_Q), in_layout(p, p.H, p.N_Q, grads.dq)));
  if (!dk_file.empty())
    files.push_back(output_npy("--dk", dk_file, out_dt, file_shape(p, p.H_KV, p.N_K),
                               in_layout(p, p.H_KV, p.N_K, grads.dk)));
  if (!dv_file.empty())
    files.push_back(output_npy("--dv", dv_file, out_dt, file_shape(p, p.H_KV, p.N_K),
                               in_layout(p, p.H_KV, p.N_K, grads.dv)));
  write_outputs(files);
  return 0;
}

// --mod: the mods, with the tensors --mod-tensor gives (dense runs) and those the command line can make (ALiBi's
// usual slopes for `heads` heads).
void parse_mods(int64_t heads, AttentionMods& mods, ModTensorValues& mod_tensors, bool packed) {
  for (const std::string& text : mod_specs)
    add_mod_spec(mods, text);
  if (packed && !mod_tensor_args.empty())
    fail("--mod-tensor applies to dense runs; with --varlen the mods may read ALiBi's slopes only (made by the "
         "command line)");
  mod_tensors = read_mod_tensor_files(mod_tensor_args, mods);
  for (const ModTensorSpec& spec : mods.tensors()) {
    if (mod_tensors.count(spec.tensor_name()))
      continue;
    if (spec.name != "alibi_slopes")
      fail("--mod: the mods {} read the tensor '{}', which the command line cannot make; {}", mods.name(),
           spec.tensor_name(),
           packed ? "with --varlen, pass it through kiln::attention::AttentionOptions::mod_tensors in C++"
                  : fmt::format("give it as --mod-tensor {}=FILE.npy", spec.tensor_name()));
    mod_tensors[spec.name] = contiguous_mod_tensor(DType::f32, {heads}, spec.name);
    const std::vector<double> slopes = standard_alibi_slopes(heads);
    for (int64_t h = 0; h < heads; ++h)
      mod_tensors[spec.name].data.set(h, slopes[static_cast<size_t>(h)]);
  }
}

// --varlen: the flags that apply to packed sequences, handed to run_varlen_attention.
int run_varlen(const std::optional<DType>& out_dt) {
  for (auto [flag, given] : {std::pair{"--batch", batch.getNumOccurrences() > 0},
                             {"--seq-q", seq_q.getNumOccurrences() > 0}, {"--seq-k", seq_k.getNumOccurrences() > 0},
                             {"--layout", layout.getNumOccurrences() > 0}, {"--q", !q_file.empty()},
                             {"--k", !k_file.empty()}, {"--v", !v_file.empty()}, {"--dout", !dout_file.empty()},
                             {"--block-mask", bool(block_mask_flag)}})
    if (given)
      fail("{} does not apply to --varlen, whose lengths give the batch and the sequences (packed inputs and dO "
           "are random; --block-mask is not built for varlen yet)",
           flag);
  if (!backward_pass)
    for (auto [flag, value] : {std::pair{"--dq", &dq_file}, {"--dk", &dk_file}, {"--dv", &dv_file}})
      if (!value->empty())
        fail("{} belongs to the backward pass; add --backward (or drop {})", flag, flag);
  if (!backward_pass && nondeterministic)
    fail("--nondeterministic belongs to the backward pass; add --backward (or drop it)");
  if (backward_pass && (!out_file.empty() || !lse_file.empty()))
    fail("--out and --lse write the forward's outputs; with --backward write the gradients with --dq, --dk, --dv");
  VarlenRun r;
  parse_varlen_lengths(varlen, "--varlen", r.problem);
  r.problem.H = heads;
  r.problem.H_KV = kv_heads.getNumOccurrences() ? int64_t(kv_heads) : int64_t(heads);
  r.problem.D = head_dim;
  r.problem.dtype = parse_attention_dtype(dtype, "--dtype");
  r.problem.causal = parse_causal(causal, "--causal");
  if (k_load != "transposed" && k_load != "row-major")
    fail("--k-load must be transposed or row-major; got '{}'", std::string(k_load));
  r.problem.k_transposed = k_load == "transposed";
  r.problem.exact_masked_v = exact_masked_v;
  check_varlen_problem(r.problem);
  r.overrides = parse_assignments(sets, "--set");
  r.check = check;
  r.seed = seed;
  r.out_file = out_file, r.lse_file = lse_file;
  r.out_dtype = *out_dt;
  r.backward = backward_pass, r.atomic_dq = nondeterministic;
  r.dq_file = dq_file, r.dk_file = dk_file, r.dv_file = dv_file;
  check_output_paths({{"--out", out_file}, {"--lse", lse_file}, {"--dq", dq_file}, {"--dk", dk_file}, {"--dv", dv_file}},
                     {});
  parse_mods(r.problem.H, r.mods, r.mod_tensors, true); // applied per sequence (attention_varlen_mods.h)
  r.executor = choose_executor(interpret);
  if (bench && !r.mods.empty())
    fail("--bench with --varlen does not time mods yet; drop --mod (without --varlen, --bench times them)");
  if (bench && r.executor == Executor::Interpreter)
    fail("--bench times the kernels on the GPU; it cannot be combined with --interpret or KILN_INTERPRET=1");
  r.bench = bench;
  r.reps = reps;
  return run_varlen_attention(r);
}

int run_attention(const KernelRegistry& /*kernels: runs kiln's own FA2*/) {
  const std::optional<DType> odt = parse_dtype(std::string(out_dtype));
  if (!odt || (*odt != DType::f16 && *odt != DType::f32 && *odt != DType::f64))
    fail("--out-dtype must be f16, f32 or f64 (NumPy has no bfloat16); got '{}'", std::string(out_dtype));
  if (varlen.getNumOccurrences())
    return run_varlen(odt);
  for (auto [flag, given] : {std::pair{"--batch", batch.getNumOccurrences() > 0},
                             {"--seq-q", seq_q.getNumOccurrences() > 0}})
    if (!given)
      fail("{} is required (or --varlen=LENS for packed variable-length sequences)", flag);
  AttentionProblem p;
  p.B = batch;
  p.H = heads;
  p.H_KV = kv_heads.getNumOccurrences() ? int64_t(kv_heads) : int64_t(heads);
  p.N_Q = seq_q;
  p.N_K = seq_k.getNumOccurrences() ? int64_t(seq_k) : int64_t(seq_q);
  p.D = head_dim;
  p.dtype = parse_attention_dtype(dtype, "--dtype");
  p.causal = parse_causal(causal, "--causal");
  if (layout != "bhsd" && layout != "bshd")
    fail("--layout must be bhsd or bshd; got '{}'", std::string(layout));
  p.bshd_layout = layout == "bshd";
  if (k_load != "transposed" && k_load != "row-major")
    fail("--k-load must be transposed or row-major; got '{}'", std::string(k_load));
  p.k_transposed = k_load == "transposed";
  p.exact_masked_v = exact_masked_v;
  check_attention_problem(p);

  const int given = !q_file.empty() + !k_file.empty() + !v_file.empty();
  if (given != 0 && given != 3)
    fail("--q, --k and --v go together: give all three .npy inputs or none (random inputs)");
  if (!backward_pass)
    for (auto [flag, value] :
         {std::pair{"--dout", &dout_file}, {"--dq", &dq_file}, {"--dk", &dk_file}, {"--dv", &dv_file}})
      if (!value->empty())
        fail("{} belongs to the backward pass; add --backward (or drop {})", flag, flag);
  if (!backward_pass && nondeterministic)
    fail("--nondeterministic belongs to the backward pass; add --backward (or drop it)");
  if (backward_pass && (!out_file.empty() || !lse_file.empty()))
    fail("--out and --lse write the forward's outputs; with --backward write the gradients with --dq, --dk, "
         "--dv");
  check_output_paths(
      {{"--out", out_file}, {"--lse", lse_file}, {"--dq", dq_file}, {"--dk", dk_file}, {"--dv", dv_file}},
      {{"--q", q_file}, {"--k", k_file}, {"--v", v_file}, {"--dout", dout_file}});

  AttentionMods mods;
  ModTensorValues mod_tensors;
  parse_mods(p.H, mods, mod_tensors, false);

  const std::map<std::string, int64_t> overrides = parse_assignments(sets, "--set");
  // --set names the parameters of the kernel that runs: over a block mask, fa2_fwd_block_mask's (BLOCK_MASK_RUNS).
  const KernelDef& fwd_def = block_mask_flag ? fa2_fwd_block_mask_def() : fa2_fwd_def();
  Config config = fwd_def.with_overrides(default_fa2_config(p), overrides);
  check_attention_config(p, config);
  // --block-mask: at the config's tiles; the forward then runs the block mask's default config with --set.
  std::optional<BlockMaskLayout> block_mask_layout_given;
  if (block_mask_flag) {
    if (nondeterministic)
      fail("--nondeterministic: the backward over a block mask (--block-mask) is always deterministic (no atomic "
           "dQ); drop one of them");
    block_mask_layout_given = block_mask_layout(p, mods, config.get("BLOCK_M"), config.get("BLOCK_N"));
    config = fa2_fwd_block_mask_def().with_overrides(
        block_mask_fwd_config(*block_mask_layout_given, p, /*runs=*/false), overrides);
    check_attention_config(p, config);
  }

  const Executor executor = choose_executor(interpret);
  if (bench && executor == Executor::Interpreter)
    fail("--bench times the kernel on the GPU; it cannot be combined with --interpret or KILN_INTERPRET=1");

  AttentionInputs inputs;
  if (given == 3) {
    inputs.q = read_input(q_file, "Q", p, p.H, p.N_Q);
    inputs.k = read_input(k_file, "K", p, p.H_KV, p.N_K);
    inputs.v = read_input(v_file, "V", p, p.H_KV, p.N_K);
  } else {
    inputs = make_inputs(p, seed, 1.0);
  }

  std::optional<HostBlockMask> block_mask;
  if (block_mask_layout_given) {
    const BlockMaskLayout& l = *block_mask_layout_given;
    block_mask = make_host_block_mask(p, mods, mod_tensors, l.block_m, l.block_n, executor);
    if (block_mask->runs && !overrides.count("BLOCK_MASK_RUNS")) // every list a run: the kernel of two ranges
      config.set("BLOCK_MASK_RUNS", 1);
    check_block_mask_config(config); // --set WARP_SPECIALIZE=1 over lists that are not all runs, and the like
    int64_t full = 0, partial = 0;
    for (int64_t row = 0; row < l.rows(); ++row) {
      full += static_cast<int64_t>(block_mask->full_count.get(row));
      partial += static_cast<int64_t>(block_mask->partial_count.get(row));
    }
    llvm::outs() << fmt::format("block mask at tiles BLOCK_M={} x BLOCK_N={}: {} full, {} partial, {} empty of {} "
                                "tiles (mask mods [{}])\n",
                                l.block_m, l.block_n, full, partial, l.rows() * l.k_tiles() - full - partial,
                                l.rows() * l.k_tiles(), l.mask_mods);
  }

  if (backward_pass)
    return run_backward(p, std::move(inputs),
                        overrides.empty() ? std::nullopt : std::optional<Config>(config), executor, *odt, mods,
                        mod_tensors, block_mask ? &*block_mask : nullptr);

  // As kiln::attention::forward does: on the GPU the autotuner picks the config (KILN_AUTOTUNE says whether
  // it may tune), unless --set fixed parameters. The interpreter runs the default: its speed says nothing.
  std::string config_source = overrides.empty() ? "the default config" : "the default config with --set";
  if (block_mask)
    config_source = "the block mask's default config" + std::string(overrides.empty() ? "" : " with --set");
  if (!mods.empty())
    config_source += "; mods " + mods.name() + " (not autotuned)";
  else if (block_mask)
    config_source += " (not autotuned)";
  if (executor == Executor::Gpu && overrides.empty() && mods.empty() && !block_mask) {
    TunedLaunch tuned = autotuned_launch(p, inputs);
    config = tuned.config;
    config_source = autotuned_source(tuned.result->source);
  }

  llvm::outs() << fmt::format("fa2_fwd {} on {} ({}; {})\n", p.str(),
                              executor == Executor::Gpu ? "the GPU" : "the interpreter", config.str(),
                              config_source);
  AttentionResult result =
      block_mask     ? run_fa2_with_block_mask(p, mods, mod_tensors, *block_mask, config, inputs, executor)
      : mods.empty() ? run_fa2_interpreted(p, config, inputs, executor)
                     : run_fa2_with_mods(p, mods, mod_tensors, config, inputs, executor);

  bool ok = true;
  std::string nonfinite;
  if (check) {
    nonfinite = nonfinite_inputs_note(
        p, {{"Q", to_doubles(inputs.q)}, {"K", to_doubles(inputs.k)}, {"V", to_doubles(inputs.v)}});
    if (!nonfinite.empty())
      llvm::outs() << "check: " << nonfinite << "\n";
    AttentionResult ref =
        mods.empty() ? reference(p, inputs) : reference_with_mods(p, inputs, mods, mod_tensors);
    const double tol = attention_tolerance(p.dtype, p.tf32, max_abs_lse(ref));
    Comparison co = compare_to_reference(result.o, ref.o);
    Comparison cmp_lse = compare_to_reference(result.lse, ref.lse);
    llvm::outs() << fmt::format("check O:   {} (tolerance {:.1e}) {}\n", co.str(), tol,
                                co.ok(tol) ? "ok" : "FAIL");
    llvm::outs() << fmt::format("check LSE: {} (tolerance {:.1e}) {}\n", cmp_lse.str(), tol,
                                cmp_lse.ok(tol) ? "ok" : "FAIL");
    ok = co.ok(tol) && cmp_lse.ok(tol);
  }
  if (bench) {
    GpuTiming t = time_fa2_on_gpu(p, config, inputs, 3, reps, mods, mod_tensors, block_mask ? &*block_mask : nullptr);
    llvm::outs() << bench_line("", t, attention_flops(p));
  }
  if (!ok) {
    llvm::errs() << program_name() << ": error: the result does not match the reference; no output written"
                 << (nonfinite.empty() ? "" : " (" + nonfinite + ")") << "\n";
    return 1;
  }

  std::vector<std::pair<OutputPath, std::string>> files;
  if (!out_file.empty())
    files.push_back(
        output_npy("--out", out_file, *odt, file_shape(p, p.H, p.N_Q), in_layout(p, p.H, p.N_Q, result.o)));
  if (!lse_file.empty())
    files.push_back(output_npy("--lse", lse_file, *odt, {p.B, p.H, p.N_Q}, result.lse));
  write_outputs(files);
  return 0;
}

} // namespace

Command attention_command() { return {&attention_sub, run_attention}; }

} // namespace kiln::cli
