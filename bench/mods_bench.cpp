#include "bench/mods_bench.h"

#include "bench/attention_bench.h"
#include "bench/attention_sampled_reference.h"
#include "bench/random_fill.h"

#include "kernels/attention/attention_api.h"
#include "kernels/attention/attention_block_mask_api.h"
#include "kernels/attention/attention_mod_library.h"
#include "kernels/attention/attention_mods_host.h"
#include "kernels/compare.h"

#include <algorithm>
#include <functional>
#include <memory>

namespace kiln::bench {
namespace {

// The block mask's tiles: FlexAttention's default block size, 128 × 128 (a kiln forward over a block mask is
// tuned at the block mask's tiles, so these are also its kernel's tiles).
constexpr int64_t kBlockMaskM = 128, kBlockMaskN = 128;

// How a case's kiln record runs: the forward with the mods (tuned), the built-in kernel the mods restate, or
// the forward with the mods over a block mask made once beforehand.
enum class Variant { Mods, Builtin, BlockMask };

// One mods case: what the peers must compute under the same record key (peers_mods.py reads `op`).
struct ModsCase {
  std::string op;   // "mods_window": the key peers.py matches
  std::string note; // what the mods are, for the report
  AttentionMods mods;
  int causal = 0;    // the built-in CAUSAL mode beside the mods
  int twin = -1;     // >= 0: also time the built-in kernel with this CAUSAL mode and no mods ("kiln_builtin")
  int documents = 0; // > 0: the document mask's ids, that many equal documents
  // Keys query row i sees among N (for the FLOP count: only visible scores count, as FlexAttention counts).
  std::function<int64_t(int64_t i, int64_t N)> visible;
};

ScoreMod identity_score() {
  return ScoreMod{"identity", {}, ScoreModFn(kDeterminedByName, [](const Value& s, const ModArgs&) { return s; }),
                  [](double s, const ModPoint&) { return s; }};
}

std::vector<ModsCase> mods_table(int64_t N) {
  const int64_t window = std::min<int64_t>(4096, N / 4), docs = 8, doc_len = N / docs;
  std::vector<ModsCase> t;
  t.push_back({"mods_noop", "score_mod identity", {}, 0, 0, 0, [](int64_t, int64_t n) { return n; }});
  t.back().mods.score = {identity_score()};
  t.push_back({"mods_causal", "mask_mod causal (top-left)", {}, 0, 1, 0, [](int64_t i, int64_t) { return i + 1; }});
  t.back().mods.mask = {causal_mask()};
  t.push_back({"mods_window", fmt::format("mask_mod sliding_window({}, 0): {} keys, causal", window - 1, window), {},
               0, -1, 0, [window](int64_t i, int64_t) { return std::min(i + 1, window); }});
  t.back().mods.mask = {sliding_window(window - 1, 0)};
  t.push_back({"mods_document", fmt::format("mask_mod document, {} documents of {}, causal (CAUSAL=1)", docs, doc_len),
               {}, 1, -1, docs, [doc_len](int64_t i, int64_t) { return i % doc_len + 1; }});
  t.back().mods.mask = {document_mask()};
  t.push_back({"mods_softcap", "score_mod softcap(30), causal (CAUSAL=1)", {}, 1, -1, 0,
               [](int64_t i, int64_t) { return i + 1; }});
  t.back().mods.score = {softcap(30)};
  return t;
}

// The document ids [B, N] of `documents` equal documents, on the host and the device.
struct DocumentIds {
  ModTensorValues host;
  rt::DeviceBuffer device;
};

std::unique_ptr<DocumentIds> document_ids(const AttentionProblem& p, int documents) {
  auto d = std::make_unique<DocumentIds>();
  ModTensorData ids = contiguous_mod_tensor(DType::i32, {p.B, p.N_Q}, "q_doc");
  const int64_t len = p.N_Q / documents;
  for (int64_t b = 0; b < p.B; ++b)
    for (int64_t i = 0; i < p.N_Q; ++i)
      ids.data.set(b * p.N_Q + i, static_cast<double>(std::min<int64_t>(i / len, documents - 1)));
  d->device = upload(ids.data);
  d->host["kv_doc"] = ids;
  d->host["q_doc"] = std::move(ids);
  return d;
}

double visible_scores(const ModsCase& mc, const AttentionProblem& p) {
  double n = 0;
  for (int64_t i = 0; i < p.N_Q; ++i)
    n += static_cast<double>(mc.visible(i, p.N_K));
  return n * static_cast<double>(p.B * p.H);
}

void run_mods_case(Session& s, CaseRecord& r, const ModsCase& mc, const AttentionProblem& p, Variant variant) {
  const bool builtin = variant == Variant::Builtin;
  std::unique_ptr<Fa2DeviceProblem> d = make_fa2_device_problem(p, s.options().seed);
  std::unique_ptr<DocumentIds> docs = mc.documents > 0 ? document_ids(p, mc.documents) : nullptr;
  using attention::TensorRef;
  const std::vector<int64_t> qshape = {p.B, p.H, p.N_Q, p.D}, kvshape = {p.B, p.H_KV, p.N_K, p.D};
  const TensorRef q = TensorRef::contiguous(d->q.ptr(), p.dtype, qshape);
  const TensorRef k = TensorRef::contiguous(d->k.ptr(), p.dtype, kvshape);
  const TensorRef v = TensorRef::contiguous(d->v.ptr(), p.dtype, kvshape);
  const TensorRef o = TensorRef::contiguous(d->o.ptr(), p.dtype, qshape);
  const TensorRef lse = TensorRef::contiguous(d->lse.ptr(), DType::f32, {p.B, p.H, p.N_Q});
  attention::AttentionOptions options;
  options.causal = static_cast<attention::Causal>(builtin ? mc.twin : mc.causal);
  options.autotune = s.options().tune ? rt::AutotuneMode::On : rt::AutotuneMode::Off;
  if (!builtin) {
    options.mods = mc.mods;
    if (docs)
      for (const char* name : {"q_doc", "kv_doc"})
        options.mod_tensors[name] = TensorRef::contiguous(docs->device.ptr(), DType::i32, {p.B, p.N_Q});
  }
  rt::Stream stream = rt::Stream::create();
  options.stream = stream.handle();
  if (variant == Variant::BlockMask) { // made once, as a user makes it for every call and layer of a shape
    options.block_mask = attention::make_block_mask({p.B, p.H, p.H_KV, p.N_Q, p.N_K}, options, kBlockMaskM,
                                                    kBlockMaskN);
  }
  attention::forward(q, k, v, o, lse, options); // tunes here (with --tune), on poisoned outputs
  stream.synchronize();
  // The config that ran (the tuner's remembered pick: no launch), and over a block mask whether its lists
  // were all runs (the kernel that may be warp-specialised).
  r.extra["config"] = attention::tune_forward(q, k, v, o, lse, options, options.autotune).config.str();
  if (options.block_mask)
    r.extra["block_mask_runs"] = options.block_mask->runs ? "yes" : "no";

  // Sampled rows against the double reference with the same mods (the twin: the built-in rule alone).
  AttentionProblem ref_problem = p;
  ref_problem.causal = static_cast<int>(options.causal);
  const ModTensorValues no_tensors;
  const ReferenceScoreFn score =
      builtin ? ReferenceScoreFn{} : mod_score_reference(ref_problem, mc.mods, docs ? docs->host : no_tensors);
  const std::vector<QueryRow> rows = sample_query_rows(p, 64, s.options().seed);
  const AttentionResult want = sampled_reference(ref_problem, d->host, rows, score);
  const AttentionResult got = gather_rows(p, download(d->o, p.dtype, q_numel(p), "O"),
                                          download(d->lse, DType::f32, p.B * p.H * p.N_Q, "LSE"), rows);
  const Comparison co = compare_to_reference(got.o, want.o), cl = compare_to_reference(got.lse, want.lse);
  r.check.method = "sampled";
  r.check.elements = static_cast<int64_t>(got.o.size());
  r.check.error = co.relative_error;
  r.check.lse_error = cl.relative_error;
  r.check.tolerance = tolerance(p.dtype, false);
  r.check.nonfinite_mismatches = co.nonfinite_mismatches + cl.nonfinite_mismatches;
  r.check.ok = co.ok(r.check.tolerance) && cl.ok(r.check.tolerance);
  if (!r.check.ok)
    return;
  // The whole call is timed (validation, the tuner's remembered pick, the launch): a user's cost, a few
  // microseconds against milliseconds of kernel.
  s.time(
      r,
      [&](rt::Stream& timed) {
        options.stream = timed.handle();
        attention::forward(q, k, v, o, lse, options);
      },
      /*flush_l2=*/false);
}

BenchCase mods_case(const ModsCase& mc, const AttentionProblem& p, Variant variant) {
  BenchCase c;
  const bool builtin = variant == Variant::Builtin;
  const char* system = builtin ? "kiln_builtin" : variant == Variant::BlockMask ? "kiln_block_mask" : "kiln";
  std::string note = mc.note;
  if (builtin)
    note = fmt::format("built-in kernel, CAUSAL={}, no mods", mc.twin);
  else if (variant == Variant::BlockMask)
    note += fmt::format("; block mask at {} x {} tiles", kBlockMaskM, kBlockMaskN);
  c.record = case_record("mods", mc.op, system, note, p.dtype, {{"B", p.B}, {"H", p.H}, {"N", p.N_Q}, {"D", p.D}},
                         -1, {});
  c.record.flops = 4.0 * static_cast<double>(p.D) * visible_scores(mc, p);
  c.record.extra["mods"] = builtin ? std::string() : mc.mods.name();
  c.run_self = [mc, p, variant](Session& s, CaseRecord& r) { run_mods_case(s, r, mc, p, variant); };
  return c;
}

} // namespace

std::vector<BenchCase> mods_cases(const BenchOptions& options) {
  // FlexAttention's usual shape: one long sequence of 16 heads of 128 (B·N = 16384, H·D = 2048, as the sweep).
  const int64_t N = options.quick ? 4096 : 16384;
  const AttentionProblem p = single_problem(DType::f16, 16384 / N, 16, N, 128, 0);
  std::vector<BenchCase> cases;
  for (const ModsCase& mc : mods_table(N)) {
    cases.push_back(mods_case(mc, p, Variant::Mods));
    if (!mc.mods.mask.empty())
      cases.push_back(mods_case(mc, p, Variant::BlockMask));
    if (mc.twin >= 0)
      cases.push_back(mods_case(mc, p, Variant::Builtin));
  }
  return cases;
}

} // namespace kiln::bench
