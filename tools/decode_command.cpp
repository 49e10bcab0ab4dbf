// `kiln decode`: split-KV decoding (kernels/attention/decode_split.h, decode_combine.h) on random inputs, in
// the interpreter or on the GPU: a few queries a sequence against a KV cache, contiguous or paged (a shuffled
// block table), with per-sequence key counts; optionally checked against the double-precision reference. The
// split kernel runs its default config for the problem, or --set's changes to it; the split count is
// --splits, or the heuristic's for this GPU (132 SMs, an H100's, in the interpreter).
#include "kernels/attention/attention_tolerance.h"
#include "kernels/attention/decode_api.h"
#include "kernels/attention/decode_problem.h"
#include "kernels/attention/decode_split.h"
#include "kernels/compare.h"
#include "runtime/device.h"
#include "runtime/timing.h"
#include "support/error.h"
#include "tools/attention_runs.h"
#include "tools/cli.h"
#include "tools/decimal_flag.h"

#include <llvm/ADT/StringExtras.h>

namespace kiln::cli {
namespace {

namespace cl = llvm::cl;

cl::SubCommand decode_sub("decode", "Run split-KV decoding on a random (optionally paged) KV cache");
cl::OptionCategory& cat = kiln_category();
DecimalFlag<int64_t> batch("batch", cl::desc("Sequences B"), cl::Required, cl::sub(decode_sub), cl::cat(cat));
DecimalFlag<int64_t> heads("heads", cl::desc("Query heads H"), cl::Required, cl::sub(decode_sub),
                           cl::cat(cat));
DecimalFlag<int64_t> kv_heads("kv-heads", cl::desc("Cache heads H_KV (default: --heads; fewer for GQA/MQA)"),
                              cl::init(0), cl::sub(decode_sub), cl::cat(cat));
DecimalFlag<int64_t> seq_q("seq-q", cl::desc("Queries a sequence N_Q (default 1)"), cl::init(1),
                           cl::sub(decode_sub), cl::cat(cat));
DecimalFlag<int64_t> seq_k("seq-k", cl::desc("Keys a sequence's cache holds N_K"), cl::Required,
                           cl::sub(decode_sub), cl::cat(cat));
cl::list<std::string> seqlens("seqlens",
                              cl::desc("Keys of each sequence, comma-separated (default: --seq-k each)"),
                              cl::CommaSeparated, cl::sub(decode_sub), cl::cat(cat));
DecimalFlag<int64_t> page_size("page-size",
                               cl::desc("Keys a page of a paged cache (a power of two >= 16); 0: "
                                        "a contiguous cache (default)"),
                               cl::init(0), cl::sub(decode_sub), cl::cat(cat));
DecimalFlag<int64_t> head_dim("head-dim", cl::desc("Head dim D"), cl::Required, cl::sub(decode_sub),
                              cl::cat(cat));
cl::opt<std::string> dtype("dtype", cl::desc("f16 | bf16 | f32 (default f16)"), cl::init("f16"),
                           cl::sub(decode_sub), cl::cat(cat));
cl::opt<std::string> causal("causal", cl::desc("none | bottom-right (default none)"), cl::init("none"),
                            cl::sub(decode_sub), cl::cat(cat));
DecimalFlag<int64_t> splits("splits",
                            cl::desc("Ranges each sequence's keys are cut into (default: the heuristic's)"),
                            cl::init(0), cl::sub(decode_sub), cl::cat(cat));
cl::list<std::string> sets("set",
                           cl::desc("Override a parameter of the split kernel: NAME=VALUE (repeatable)"),
                           cl::sub(decode_sub), cl::cat(cat));
cl::opt<bool> interpret("interpret", cl::desc("Run in the CPU interpreter (also KILN_INTERPRET=1)"),
                        cl::sub(decode_sub), cl::cat(cat));
cl::opt<bool> check("check", cl::desc("Compare with the double-precision reference"), cl::sub(decode_sub),
                    cl::cat(cat));
cl::opt<bool> bench("bench", cl::desc("Time decode() on the GPU (median of --reps launches, L2 flushed)"),
                    cl::sub(decode_sub), cl::cat(cat));
DecimalFlag<int> reps("reps", cl::desc("Timed launches for --bench (default 20)"), cl::init(20),
                      cl::sub(decode_sub), cl::cat(cat));
DecimalFlag<uint64_t> seed("seed", cl::desc("Seed of the random inputs (default 1)"), cl::init(1),
                           cl::sub(decode_sub), cl::cat(cat));

rt::DeviceBuffer to_device(const HostBuffer& b) {
  rt::DeviceBuffer d(std::max<size_t>(b.bytes.size(), 16));
  d.copy_from_host(b.bytes.data(), b.bytes.size());
  return d;
}

// decode() on device copies of `in`, timed; prints the median and the bandwidth over the keys' K/V bytes.
void bench_decode(const DecodeProblem& p, const DecodeInputs& in, const Config& split, int64_t num_splits) {
  using attention::TensorRef;
  rt::DeviceBuffer q = to_device(in.q), k = to_device(in.k), v = to_device(in.v),
                   table = to_device(in.block_table), lens = to_device(in.seqlens_k);
  const int64_t rows = p.B * p.H * p.N_Q;
  rt::DeviceBuffer o(static_cast<size_t>(rows * p.D * dtype_bytes(p.dtype))),
      lse(static_cast<size_t>(rows) * 4);
  const uint64_t workspace_bytes = attention::decode_workspace_bytes(p.B, p.H, p.N_Q, p.D, num_splits);
  rt::DeviceBuffer workspace(workspace_bytes);
  const int64_t cache_b = p.paged() ? p.num_pages() : p.B, cache_n = p.paged() ? p.page_size : p.N_K;
  attention::DecodeOptions options;
  options.causal = p.causal ? attention::Causal::BottomRight : attention::Causal::None;
  options.num_splits = num_splits;
  options.split_config = split;
  options.workspace =
      TensorRef::contiguous(workspace.ptr(), DType::f32, {static_cast<int64_t>(workspace_bytes / 4)});
  if (p.paged())
    options.block_table = TensorRef::contiguous(table.ptr(), DType::i32, {p.B, p.max_pages()});
  if (p.has_seqlens())
    options.seqlens_k = TensorRef::contiguous(lens.ptr(), DType::i32, {p.B});
  const TensorRef q_ref = TensorRef::contiguous(q.ptr(), p.dtype, {p.B, p.N_Q, p.H, p.D});
  const TensorRef k_ref = TensorRef::contiguous(k.ptr(), p.dtype, {cache_b, cache_n, p.H_KV, p.D});
  const TensorRef v_ref = TensorRef::contiguous(v.ptr(), p.dtype, {cache_b, cache_n, p.H_KV, p.D});
  const TensorRef o_ref = TensorRef::contiguous(o.ptr(), p.dtype, {p.B, p.N_Q, p.H, p.D});
  const TensorRef lse_ref = TensorRef::contiguous(lse.ptr(), DType::f32, {p.B, p.H, p.N_Q});
  rt::TimingOptions timing;
  timing.reps = reps;
  timing.flush_l2 = true;
  const double ms = rt::time_kernel_ms(
      [&](rt::Stream& stream) {
        options.stream = stream.handle();
        attention::decode(q_ref, k_ref, v_ref, o_ref, lse_ref, options);
      },
      timing);
  double kv_bytes = 0;
  for (int64_t b = 0; b < p.B; ++b)
    kv_bytes += 2.0 * static_cast<double>(p.seqlen(b) * p.H_KV * p.D * dtype_bytes(p.dtype));
  const double gbps = kv_bytes / (ms * 1e-3) / 1e9, peak = rt::nominal_peak_rates(rt::current_device()).gbps;
  llvm::outs() << fmt::format(
      "bench: median {:.4f} ms ({} runs, L2 flushed), {} of K/V at {:.0f} GB/s, {:.1f} % of "
      "the nominal {:.0f} GB/s\n",
      ms, int(reps), human_bytes(kv_bytes), gbps, 100.0 * gbps / peak, peak);
}

int run_decode_command(const KernelRegistry& /*kernels: runs kiln's own decoding kernels*/) {
  DecodeProblem p;
  p.B = batch, p.H = heads, p.N_Q = seq_q, p.N_K = seq_k, p.D = head_dim;
  p.H_KV = kv_heads.getNumOccurrences() ? int64_t(kv_heads) : int64_t(heads);
  p.dtype = parse_attention_dtype(dtype, "--dtype");
  if (causal != "none" && causal != "bottom-right")
    fail("--causal must be none or bottom-right (decoding's mask); got '{}'", std::string(causal));
  p.causal = causal == "none" ? 0 : 2;
  p.page_size = page_size;
  for (const std::string& s : seqlens) {
    int64_t n = 0;
    if (llvm::StringRef(s).getAsInteger(10, n) || n < 0 || n > p.N_K)
      fail("--seqlens: '{}' is not a key count from 0 to --seq-k={}", s, p.N_K);
    p.seqlens_k.push_back(n);
  }
  if (!p.seqlens_k.empty() && static_cast<int64_t>(p.seqlens_k.size()) != p.B)
    fail("--seqlens gives {} key counts; expected one per sequence (--batch={})", p.seqlens_k.size(), p.B);
  if (p.B < 1 || p.H < 1 || p.H_KV < 1 || p.N_Q < 1 || p.N_K < 1 || p.H % p.H_KV != 0)
    fail("decode needs B, H, H_KV, N_Q, N_K >= 1 and H a multiple of H_KV; got {}", p.str());
  if (p.D < 8 || p.D > 256 || p.D % 8 != 0)
    fail("--head-dim={} is not supported; expected a multiple of 8 from 8 to 256", p.D);
  if (p.page_size != 0 && (p.page_size < 16 || (p.page_size & (p.page_size - 1)) != 0))
    fail("--page-size={} is not a power of two >= 16 (or 0 for a contiguous cache)", p.page_size);
  if (splits < 0)
    fail("--splits={} is negative; expected a split count, or 0 for the heuristic's", int64_t(splits));

  Config split =
      decode_split_def().with_overrides(default_decode_split_config(p), parse_assignments(sets, "--set"));
  check_decode_split_config(p, split);
  const Executor executor = choose_executor(interpret);
  if (bench && executor == Executor::Interpreter)
    fail("--bench times decode() on the GPU; it cannot be combined with --interpret or KILN_INTERPRET=1");
  const int64_t slots = executor == Executor::Gpu ? attention::decode_slots(split) : kInterpreterDecodeSlots;
  const int64_t bn = split.get("BLOCK_N");
  const int64_t num_splits =
      splits ? int64_t(splits) : choose_num_splits(p.B * p.H_KV * decode_row_tiles(p, split), (p.N_K + bn - 1) / bn, slots);

  const DecodeInputs inputs = make_decode_inputs(p, seed, 1.0);
  llvm::outs() << fmt::format("decode {} on {}, {} split(s) ({}; decode_split {})\n", p.str(),
                              executor == Executor::Gpu ? "the GPU" : "the interpreter", num_splits,
                              splits ? "--splits" : fmt::format("the heuristic's for {} programs at once", slots),
                              split.str());
  const AttentionResult result =
      run_decode(p, split, default_decode_combine_config(p), num_splits, inputs, executor);
  if (bench)
    bench_decode(p, inputs, split, num_splits);
  if (!check)
    return 0;
  const AttentionResult ref = decode_reference(p, inputs);
  const double tol = attention_tolerance(p.dtype, false, max_abs_lse(ref));
  const Comparison o = compare_to_reference(result.o, ref.o), lse = compare_to_reference(result.lse, ref.lse);
  llvm::outs() << fmt::format("check O:   {} (tolerance {:.1e}) {}\n", o.str(), tol,
                              o.ok(tol) ? "ok" : "FAIL");
  llvm::outs() << fmt::format("check LSE: {} (tolerance {:.1e}) {}\n", lse.str(), tol,
                              lse.ok(tol) ? "ok" : "FAIL");
  if (o.ok(tol) && lse.ok(tol))
    return 0;
  llvm::errs() << program_name() << ": error: the result does not match the reference\n";
  return 1;
}

} // namespace

Command decode_command() { return {&decode_sub, run_decode_command}; }

} // namespace kiln::cli
