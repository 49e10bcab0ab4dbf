// `kiln tune fa2_fwd`: runs the autotuner for one attention shape on the GPU, prints every candidate
// (time, TFLOP/s, registers, shared memory, or why it fell) and stores the winner in the tuning cache,
// where kiln::attention::forward finds it for every later process.
#include "kernels/attention/attention_api.h"
#include "runtime/autotuner.h"
#include "support/half.h"
#include "tools/attention_runs.h"
#include "tools/cli.h"

#include <random>

namespace kiln::cli {

namespace {

namespace cl = llvm::cl;

cl::SubCommand tune_sub("tune", "Autotune a kernel for one shape on the GPU and remember the winner");
cl::OptionCategory& cat = kiln_category();
cl::opt<std::string> kernel_name(cl::Positional, cl::desc("KERNEL (fa2_fwd)"), cl::Required, cl::sub(tune_sub),
                                 cl::cat(cat));
cl::opt<int64_t> batch("batch", cl::desc("Batch size (default 1)"), cl::init(1), cl::sub(tune_sub), cl::cat(cat));
cl::opt<int64_t> heads("heads", cl::desc("Query heads (default 1)"), cl::init(1), cl::sub(tune_sub), cl::cat(cat));
cl::opt<int64_t> kv_heads("kv-heads", cl::desc("K/V heads (default: --heads)"), cl::init(0), cl::sub(tune_sub),
                          cl::cat(cat));
cl::opt<int64_t> seq_q("seq-q", cl::desc("Query sequence length"), cl::Required, cl::sub(tune_sub), cl::cat(cat));
cl::opt<int64_t> seq_k("seq-k", cl::desc("Key sequence length (default: --seq-q)"), cl::init(0), cl::sub(tune_sub),
                       cl::cat(cat));
cl::opt<int64_t> head_dim("head-dim", cl::desc("Head dim D"), cl::Required, cl::sub(tune_sub), cl::cat(cat));
cl::opt<std::string> dtype("dtype", cl::desc("f16 | bf16 | f32 (default f16)"), cl::init("f16"), cl::sub(tune_sub),
                           cl::cat(cat));
cl::opt<std::string> causal("causal", cl::desc("none | top-left | bottom-right (default none)"), cl::init("none"),
                            cl::sub(tune_sub), cl::cat(cat));
cl::opt<bool> cached("cached", cl::desc("Use a remembered result when there is one (default: tune now)"),
                     cl::sub(tune_sub), cl::cat(cat));

// Contiguous [B, heads, N, D] device tensor of random values in [-1, 1].
rt::DeviceBuffer random_tensor(DType t, int64_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-1, 1);
  std::vector<uint8_t> bytes(static_cast<size_t>(n * dtype_bytes(t)));
  for (int64_t i = 0; i < n; ++i) {
    float x = u(rng);
    if (t == DType::f32) {
      std::memcpy(&bytes[static_cast<size_t>(i) * 4], &x, 4);
    } else {
      uint16_t h = t == DType::f16 ? float_to_f16_bits(x) : float_to_bf16_bits(x);
      std::memcpy(&bytes[static_cast<size_t>(i) * 2], &h, 2);
    }
  }
  rt::DeviceBuffer b(bytes.size());
  b.copy_from_host(bytes.data(), bytes.size());
  return b;
}

int run_tune() {
  if (kernel_name != "fa2_fwd")
    fail("kiln tune supports fa2_fwd (the kernel with a host op that knows its arguments), got '{}'",
         kernel_name.getValue());
  require_gpu("kiln tune times every candidate on the GPU");
  const DType t = parse_attention_dtype(dtype, "--dtype");
  const int64_t hkv = kv_heads ? kv_heads : heads, nk = seq_k ? seq_k : seq_q;
  auto shape = [](int64_t b, int64_t h, int64_t n, int64_t d) { return llvm::SmallVector<int64_t, 4>{b, h, n, d}; };
  rt::DeviceBuffer q = random_tensor(t, batch * heads * seq_q * head_dim, 1);
  rt::DeviceBuffer k = random_tensor(t, batch * hkv * nk * head_dim, 2);
  rt::DeviceBuffer v = random_tensor(t, batch * hkv * nk * head_dim, 3);
  rt::DeviceBuffer o(static_cast<size_t>(batch * heads * seq_q * head_dim * dtype_bytes(t)));
  using attention::TensorRef;
  attention::AttentionOptions options;
  options.causal = static_cast<attention::Causal>(parse_causal(causal, "--causal"));
  TunedLaunch chosen = attention::tune_forward(
      TensorRef::contiguous(q.ptr(), t, shape(batch, heads, seq_q, head_dim)),
      TensorRef::contiguous(k.ptr(), t, shape(batch, hkv, nk, head_dim)),
      TensorRef::contiguous(v.ptr(), t, shape(batch, hkv, nk, head_dim)),
      TensorRef::contiguous(o.ptr(), t, shape(batch, heads, seq_q, head_dim)), std::nullopt, options,
      cached ? rt::AutotuneMode::Cached : rt::AutotuneMode::Force);
  const rt::TuneResult& r = chosen.result;
  llvm::outs() << "fa2_fwd " << r.key.key << " on " << r.key.device << " (" << r.key.arch << ")\n";
  if (!r.table.empty())
    llvm::outs() << format_tune_table(r.table, chosen.config.str());
  const char* source = r.source == rt::TuneSource::Tuned    ? "tuned now"
                       : r.source == rt::TuneSource::Memory ? "remembered (this process)"
                       : r.source == rt::TuneSource::Disk   ? "remembered (tuning cache)"
                                                            : "the default (nothing remembered)";
  llvm::outs() << "chosen: " << chosen.config.str() << " — " << source << "\n";
  return 0;
}

} // namespace

Command tune_command() { return {&tune_sub, run_tune}; }

} // namespace kiln::cli
