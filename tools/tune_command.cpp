// `kiln tune KERNEL`: runs the autotuner for one problem of any registered kernel on the GPU, prints every
// candidate (time, TFLOP/s or GB/s, registers, shared memory, or why it fell) and stores the winner in the
// tuning cache, where later processes find it.
//
// Any kernel: sizes and scalar arguments come as --shape/--set NAME=VALUE (parameters given with --set are
// fixed, the rest of the config space is tuned); random inputs are laid out by the kernel's launch plan
// (analysis/launch_plan.h), and outputs are written to scratch copies. fa2_fwd goes through
// kiln::attention::tune_forward, so that its pick is the one kiln::attention::forward finds; it also takes
// the attention flags (--batch, --heads, --seq-q, --head-dim, ...).
#include "analysis/perf_model.h"
#include "kernels/attention/attention_api.h"
#include "kernels/dtype_param.h"
#include "runtime/autotuner.h"
#include "support/half.h"
#include "tools/attention_runs.h"
#include "tools/cli.h"
#include "tools/decimal_flag.h"
#include "tools/kernel_problem.h"

#include <fmt/ranges.h>

#include <cstring>
#include <random>

namespace kiln::cli {

namespace {

namespace cl = llvm::cl;

cl::SubCommand tune_sub("tune", "Autotune a kernel for one problem on the GPU and remember the winner");
cl::OptionCategory& cat = kiln_category();
cl::opt<std::string> kernel_name(cl::Positional, cl::desc("KERNEL (see `kiln list`)"), cl::Required,
                                 cl::sub(tune_sub), cl::cat(cat));
cl::list<std::string> shape("shape", cl::desc("Sizes and scalar arguments: NAME=VALUE,... (see `kiln list`)"),
                            cl::value_desc("NAME=V,..."), cl::sub(tune_sub), cl::cat(cat));
cl::list<std::string> sets("set", cl::desc("Fix a parameter (or give a size): NAME=VALUE"),
                           cl::value_desc("NAME=VALUE"), cl::sub(tune_sub), cl::cat(cat));
cl::opt<bool> cached("cached", cl::desc("Use a remembered result when there is one (default: tune now)"),
                     cl::sub(tune_sub), cl::cat(cat));
DecimalFlag<uint64_t> seed("seed", cl::desc("Seed of the random inputs (default 1)"), cl::init(1),
                       cl::sub(tune_sub), cl::cat(cat));
// fa2_fwd's attention flags.
DecimalFlag<int64_t> batch("batch", cl::desc("fa2_fwd: batch size (default 1)"), cl::init(1), cl::sub(tune_sub),
                       cl::cat(cat));
DecimalFlag<int64_t> heads("heads", cl::desc("fa2_fwd: query heads (default 1)"), cl::init(1), cl::sub(tune_sub),
                       cl::cat(cat));
DecimalFlag<int64_t> kv_heads("kv-heads", cl::desc("fa2_fwd: K/V heads (default: --heads)"), cl::init(0),
                          cl::sub(tune_sub), cl::cat(cat));
DecimalFlag<int64_t> seq_q("seq-q", cl::desc("fa2_fwd: query sequence length"), cl::init(0), cl::sub(tune_sub),
                       cl::cat(cat));
DecimalFlag<int64_t> seq_k("seq-k", cl::desc("fa2_fwd: key sequence length (default: --seq-q)"), cl::init(0),
                       cl::sub(tune_sub), cl::cat(cat));
DecimalFlag<int64_t> head_dim("head-dim", cl::desc("fa2_fwd: head dim D"), cl::init(0), cl::sub(tune_sub),
                          cl::cat(cat));
cl::opt<std::string> dtype("dtype", cl::desc("fa2_fwd: f16 | bf16 | f32 (default f16)"), cl::init("f16"),
                           cl::sub(tune_sub), cl::cat(cat));
cl::opt<std::string> causal("causal", cl::desc("fa2_fwd: none | top-left | bottom-right (default none)"),
                            cl::init("none"), cl::sub(tune_sub), cl::cat(cat));

const char* source_text(rt::TuneSource s) {
  switch (s) {
  case rt::TuneSource::Tuned:
    return "tuned now";
  case rt::TuneSource::Memory:
    return "remembered (this process)";
  case rt::TuneSource::Disk:
    return "remembered (tuning cache)";
  case rt::TuneSource::Default:
    break;
  }
  return "the default (nothing remembered)";
}

rt::AutotuneMode mode() { return cached ? rt::AutotuneMode::Cached : rt::AutotuneMode::Force; }

void print_result(const std::string& kernel, const TunedLaunch& chosen) {
  const rt::TuneResult& r = *chosen.result;
  llvm::outs() << kernel << " " << r.key.key << " on " << r.key.device << " (" << r.key.arch << ")\n";
  if (!r.table.empty())
    llvm::outs() << rt::format_tune_table(r.table, chosen.config.str());
  llvm::outs() << "chosen: " << chosen.config.str() << " — " << source_text(r.source) << "\n";
}

std::map<std::string, int64_t> assignments() { return shape_and_set_assignments(shape, sets); }

bool attention_flags_given() {
  for (const cl::Option* o : std::initializer_list<const cl::Option*>{&batch, &heads, &kv_heads, &seq_q,
                                                                      &seq_k, &head_dim, &dtype, &causal})
    if (o->getNumOccurrences())
      return true;
  return false;
}

// Contiguous device tensor of n random values in [-1, 1].
rt::DeviceBuffer random_tensor(DType t, int64_t n, uint64_t s) {
  std::mt19937_64 rng(s);
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

// fa2_fwd through the attention API, from the attention flags or from --shape/--set (sizes B, H, H_KV, N_Q,
// N_K, D; problem parameters DTYPE, CAUSAL, K_TRANSPOSED, TF32). The tile parameters are what it tunes.
int tune_fa2(const KernelDef& def) {
  AttentionProblem p;
  attention::AttentionOptions options;
  const std::map<std::string, int64_t> given = assignments();
  if (!given.empty() && attention_flags_given())
    fail("fa2_fwd takes either the attention flags (--batch, --heads, --seq-q, ...) or --shape/--set, not "
         "both");
  if (given.empty()) {
    if (!seq_q || !head_dim)
      fail(
          "kiln tune fa2_fwd needs --seq-q and --head-dim (or --shape B=..,H=..,H_KV=..,N_Q=..,N_K=..,D=..)");
    p.B = batch, p.H = heads, p.H_KV = kv_heads ? kv_heads : heads, p.N_Q = seq_q;
    p.N_K = seq_k ? seq_k : seq_q, p.D = head_dim;
    p.dtype = parse_attention_dtype(dtype, "--dtype");
    p.causal = parse_causal(causal, "--causal");
  } else {
    const KernelProblem kp = parse_kernel_problem(def, given);
    for (const auto& [name, v] : given)
      if (name.rfind("BLOCK_", 0) == 0 || name == "MIN_BLOCKS_PER_SM" || name.rfind("stride_", 0) == 0)
        fail("kiln tune fa2_fwd chooses {} itself (tiles) or from the shape (strides); give only the sizes "
             "and DTYPE, CAUSAL, K_TRANSPOSED, TF32",
             name);
    p.B = kp.sizes.at("B"), p.H = kp.sizes.at("H"), p.H_KV = kp.sizes.at("H_KV");
    p.N_Q = kp.sizes.at("N_Q"), p.N_K = kp.sizes.at("N_K"), p.D = kp.sizes.at("D");
    p.dtype = dtype_from_param(kp.config.get("DTYPE"), "fa2_fwd");
    p.causal = static_cast<int>(kp.config.get("CAUSAL"));
    p.k_transposed = kp.config.get("K_TRANSPOSED") != 0;
    p.tf32 = kp.config.get("TF32") != 0;
  }
  check_attention_problem(p);
  options.causal = static_cast<attention::Causal>(p.causal);
  options.k_transposed = p.k_transposed;
  options.tf32 = p.tf32;
  require_gpu("kiln tune times every candidate on the GPU");
  auto shape_of = [](int64_t b, int64_t h, int64_t n, int64_t d) {
    return llvm::SmallVector<int64_t, 4>{b, h, n, d};
  };
  rt::DeviceBuffer q = random_tensor(p.dtype, p.B * p.H * p.N_Q * p.D, seed);
  rt::DeviceBuffer k = random_tensor(p.dtype, p.B * p.H_KV * p.N_K * p.D, seed + 1);
  rt::DeviceBuffer v = random_tensor(p.dtype, p.B * p.H_KV * p.N_K * p.D, seed + 2);
  rt::DeviceBuffer o(static_cast<size_t>(p.B * p.H * p.N_Q * p.D * dtype_bytes(p.dtype)));
  using attention::TensorRef;
  TunedLaunch chosen = attention::tune_forward(
      TensorRef::contiguous(q.ptr(), p.dtype, shape_of(p.B, p.H, p.N_Q, p.D)),
      TensorRef::contiguous(k.ptr(), p.dtype, shape_of(p.B, p.H_KV, p.N_K, p.D)),
      TensorRef::contiguous(v.ptr(), p.dtype, shape_of(p.B, p.H_KV, p.N_K, p.D)),
      TensorRef::contiguous(o.ptr(), p.dtype, shape_of(p.B, p.H, p.N_Q, p.D)), std::nullopt, options, mode());
  print_result("fa2_fwd", chosen);
  return 0;
}

// Any other kernel: the problem from --shape/--set, inputs from its launch plan, outputs on scratch.
int tune_generic(const KernelDef& def) {
  if (attention_flags_given())
    fail("--batch, --heads, --seq-q, --head-dim, --dtype and --causal describe an attention problem for "
         "fa2_fwd; give the sizes of '{}' with --shape (its sizes: {})",
         def.name, fmt::format("{}", fmt::join(def.size_args, ", ")));
  const std::map<std::string, int64_t> given = assignments();
  const KernelProblem problem = parse_kernel_problem(def, given);
  // A --set of what the space chooses would be dropped for the space's values (and a pick tuned under it
  // would be remembered for the problem without it): refused, as fa2_fwd's tiles are.
  for (const std::string& name : chosen_by_tuning(def))
    if (given.count(name))
      fail("kiln tune {} chooses {} itself: its config space sets it; --set only what the space leaves to the "
           "problem, or time one config with `run {} --set {}=...`",
           def.name, name, def.name, name);
  TunedLaunch chosen = tune_problem(problem, mode(), seed, [&](const LaunchPlan& plan) {
    llvm::outs() << fmt::format("{} {}: random inputs (seed {}), outputs on scratch copies\n", def.name,
                                problem.sizes_text(), uint64_t(seed))
                 << describe_plan(plan);
  });
  print_result(def.name, chosen);
  return 0;
}

int run_tune(const KernelRegistry& kernels) {
  const KernelDef& def = kernels.find(kernel_name);
  return def.name == "fa2_fwd" ? tune_fa2(def) : tune_generic(def);
}

} // namespace

Command tune_command() { return {&tune_sub, run_tune}; }

} // namespace kiln::cli
