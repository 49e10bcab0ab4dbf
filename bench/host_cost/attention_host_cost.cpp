// Host time per call of the attention entry points' pieces, in microseconds (median over rounds of a fixed
// number of calls): what the C ABI's per-call cost is made of, measured without torch or Python.
//
//   forward / backward validation   validate_attention_args, validate_attention_bwd_args (nine tensors)
//   backward configs                the configs the backward derives per call (default_bwd_configs for both
//                                   variants, the preprocess's and the dQ convert's)
//   backward's defs                 the KernelDefs of its four kernels
//   fwd def with mods               fa2_fwd_def(mods) for ALiBi + a sliding window (the mods' identity)
//   tensor-map lookup (hit)         one map's key and its lookup in a TensorMapCache (a stand-in encoder):
//                                   what a launch with tensor maps pays per map besides its spec
//   plan address rechecks           what a ForwardPlan's run checks of its five addresses
//                                   (detail::check_forward_addresses)
//   forward / backward call         (GPU only) attention::forward and backward_with_workspace on a small
//                                   problem, KILN_AUTOTUNE=off, launches included, the stream synchronised
//                                   between rounds only
//   forward pieces                  (GPU only) what a forward call is made of, one by one: the device query
//                                   (current_device), the launch arguments, the tuner's lookup of a
//                                   remembered pick (select), and the kernel's launch on prebuilt arguments
//                                   (argument packing, tensor maps where the kernel has them, cuLaunchKernel)
//   plan run                        (GPU only) ForwardPlan::run on the forward call's tensors: the address
//                                   rechecks, the picks_version check, the five pointers patched and the
//                                   launch; what the C ABI's kiln_attention_plan_forward and kiln.attention
//                                   run
//
// Everything but the last two rows runs on a machine without a GPU; addresses are never dereferenced there.
//   kiln_attention_host_cost [--calls 2000] [--rounds 7]
#include "kernels/attention/attention_bwd_api.h"
#include "kernels/attention/attention_bwd_problem.h"
#include "kernels/attention/attention_forward_plan.h"
#include "kernels/attention/attention_forward_prepare.h"
#include "kernels/attention/attention_launch.h"
#include "kernels/attention/attention_mod_library.h"
#include "kernels/attention/fa2_bwd_dkdv.h"
#include "kernels/attention/fa2_bwd_dq.h"
#include "kernels/attention/fa2_bwd_dq_convert.h"
#include "kernels/attention/fa2_bwd_preprocess.h"
#include "kernels/attention/fa2_fwd.h"
#include "runtime/cuda_driver.h"
#include "runtime/device.h"
#include "runtime/tensor_map_cache.h"

#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace {

using namespace kiln;
using namespace kiln::attention;

// The median over `rounds` of the time per call of `calls` calls, after one warm-up call; `between_rounds`
// runs outside the timing (a synchronisation, say).
double per_call_us(const std::function<void()>& call, int calls, int rounds,
                   const std::function<void()>& between_rounds) {
  call(); // warm-up: first-use caches and compiles
  between_rounds();
  std::vector<double> times;
  for (int r = 0; r < rounds; ++r) {
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i)
      call();
    const std::chrono::duration<double, std::micro> spent = std::chrono::steady_clock::now() - start;
    times.push_back(spent.count() / calls);
    between_rounds();
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// The nine tensors of one backward call, at the addresses `at` hands out.
struct BackwardTensors {
  TensorRef q, k, v, o, lse, dout, dq, dk, dv;
};

BackwardTensors backward_tensors(int64_t B, int64_t H, int64_t N, int64_t D,
                                 const std::function<uint64_t(uint64_t bytes)>& at) {
  auto tensor = [&](DType dtype, llvm::ArrayRef<int64_t> shape) {
    int64_t n = 1;
    for (int64_t s : shape)
      n *= s;
    return TensorRef::contiguous(at(static_cast<uint64_t>(n * dtype_bytes(dtype))), dtype, shape);
  };
  const std::vector<int64_t> qkv = {B, H, N, D};
  BackwardTensors t;
  for (TensorRef* x : {&t.q, &t.k, &t.v, &t.o})
    *x = tensor(DType::f16, qkv);
  t.lse = tensor(DType::f32, {B, H, N});
  for (TensorRef* x : {&t.dout, &t.dq, &t.dk, &t.dv})
    *x = tensor(DType::f16, qkv);
  return t;
}

void print_row(const char* what, double us) { fmt::print("{:<34} {:>9.2f}\n", what, us); }

} // namespace

int main(int argc, char** argv) {
  int calls = 2000, rounds = 7;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--calls"))
      calls = std::atoi(argv[i + 1]);
    else if (!std::strcmp(argv[i], "--rounds"))
      rounds = std::atoi(argv[i + 1]);
  }
  const int64_t B = 1, H = 8, N = 256, D = 64;
  fmt::print("attention host cost, B{} H{} N{} D{} f16 causal, {} calls x {} rounds (us per call)\n", B, H, N,
             D, calls, rounds);

  uint64_t next = uint64_t{1} << 40; // fake, 256-byte aligned and disjoint
  const BackwardTensors fake = backward_tensors(B, H, N, D, [&](uint64_t bytes) {
    const uint64_t a = next;
    next += (bytes + 255) / 256 * 256;
    return a;
  });
  BackwardOptions options;
  options.causal = Causal::TopLeft;
  options.autotune = rt::AutotuneMode::Off;
  const BackwardTensors& t = fake;
  const AttentionProblem p = validate_attention_args(t.q, t.k, t.v, t.o, t.lse, options).problem;
  AttentionMods mods;
  mods.score = {alibi()};
  mods.mask = {sliding_window(64, 0)};
  auto no_sync = [] {};
  auto forward_validation = [&] { (void)validate_attention_args(t.q, t.k, t.v, t.o, t.lse, options); };
  auto backward_validation = [&] {
    (void)validate_attention_bwd_args(t.q, t.k, t.v, t.o, t.lse, t.dout, t.dq, t.dk, t.dv, options);
  };
  auto backward_configs = [&] {
    const AttentionBwdConfigs deterministic = default_bwd_configs(p);
    (void)default_bwd_configs(p, /*atomic_dq=*/true);
    (void)bwd_preprocess_config(p, deterministic.dkdv);
    (void)bwd_dq_convert_config(p);
  };
  auto backward_defs = [&] {
    (void)fa2_bwd_preprocess_def().name, (void)fa2_bwd_dkdv_def().name;
    (void)fa2_bwd_dq_def().name, (void)fa2_bwd_dq_convert_def().name;
  };
  auto fwd_def_with_mods = [&] { (void)fa2_fwd_def(mods).name; };
  print_row("forward validation", per_call_us(forward_validation, calls, rounds, no_sync));
  print_row("backward validation", per_call_us(backward_validation, calls, rounds, no_sync));
  print_row("backward configs", per_call_us(backward_configs, calls, rounds, no_sync));
  print_row("backward's defs", per_call_us(backward_defs, calls, rounds, no_sync));
  print_row("fwd def with mods", per_call_us(fwd_def_with_mods, calls, rounds, no_sync));
  rt::TensorMapSpec spec;
  spec.global_address = uint64_t{1} << 40;
  spec.global_dims = {D, N, H, B};
  spec.global_strides_bytes = {2, H * D * 2, D * 2, N * H * D * 2};
  spec.box_dims = {D, 64, 1, 1};
  spec.element_strides = {1, 1, 1, 1};
  spec.swizzle = rt::TensorMapSwizzle::span128;
  rt::TensorMapCache maps(16, [](const rt::TensorMapSpec&) { return rt::CUtensorMap{}; });
  auto map_lookup = [&] { (void)maps.get(spec); };
  print_row("tensor-map lookup (hit)", per_call_us(map_lookup, calls, rounds, no_sync));
  const ForwardAddresses addresses{t.q.data, t.k.data, t.v.data, t.o.data, t.lse.data};
  const detail::ForwardExtents extents{
      static_cast<uint64_t>(B * H * N * D * 2), static_cast<uint64_t>(B * H * N * D * 2),
      static_cast<uint64_t>(B * H * N * D * 2), static_cast<uint64_t>(B * H * N * D * 2),
      static_cast<uint64_t>(B * H * N * 4)};
  auto plan_rechecks = [&] { detail::check_forward_addresses(addresses, extents, {"ForwardPlan::run", {}}); };
  print_row("plan address rechecks", per_call_us(plan_rechecks, calls, rounds, no_sync));

  std::string why;
  if (!rt::driver_available(&why)) {
    fmt::print("(no GPU: {}; the whole calls are not timed)\n", why);
    return 0;
  }
  rt::current_device();
  std::vector<rt::DeviceBuffer> buffers;
  const BackwardTensors dev = backward_tensors(B, H, N, D, [&](uint64_t bytes) {
    buffers.emplace_back(bytes);
    KILN_CU_CHECK(cuMemsetD8, "zeroing a tensor", buffers.back().ptr(), 0, bytes);
    return buffers.back().ptr();
  });
  rt::DeviceBuffer workspace(backward_workspace_bytes(dev.q, options));
  const BackwardWorkspace ws{workspace.ptr(), workspace.bytes()};
  auto sync = [] { KILN_CU_CHECK(cuCtxSynchronize, "synchronising"); };
  auto forward_call = [&] { forward(dev.q, dev.k, dev.v, dev.o, dev.lse, options); };
  auto backward_call = [&] {
    backward_with_workspace(dev.q, dev.k, dev.v, dev.o, dev.lse, dev.dout, dev.dq, dev.dk, dev.dv, ws,
                            options);
  };
  // Launch rows make fewer calls a round: thousands of queued launches fill the driver's queue, after which
  // a launch waits for the GPU and the row would time kernels, not the host.
  const int launches = std::min(calls, 200);
  print_row("forward call", per_call_us(forward_call, launches, rounds, sync));
  print_row("backward call", per_call_us(backward_call, launches, rounds, sync));

  // The forward's pieces, as forward() runs them with KILN_AUTOTUNE=off (the default config, remembered).
  const ValidatedAttention va = validate_attention_args(dev.q, dev.k, dev.v, dev.o, dev.lse, options);
  const std::vector<LaunchArg> args = forward_launch_args(va, *va.lse);
  const std::vector<OutputArg> outputs = {{3, static_cast<size_t>(B * H * N * D * 2)},
                                          {4, static_cast<size_t>(B * H * N * 4)}};
  TuneOptions tune;
  tune.mode = rt::AutotuneMode::Off;
  const Config base = default_fa2_config(va.problem);
  const SizeArgs sizes = attention_size_args(va.problem);
  auto select = [&] {
    (void)detail::attention_tuner().select(fa2_fwd_def(), base, sizes, args, outputs, tune);
  };
  const TunedLaunch chosen =
      detail::attention_tuner().select(fa2_fwd_def(), base, sizes, args, outputs, tune);
  const rt::Stream stream = rt::Stream::wrap(nullptr);
  auto launch_only = [&] { chosen.kernel->launch(chosen.grid, args, stream); };
  auto device_query = [] { (void)rt::current_device(); };
  auto launch_args = [&] { (void)forward_launch_args(va, *va.lse); };
  print_row("  current_device", per_call_us(device_query, calls, rounds, no_sync));
  print_row("  forward_launch_args", per_call_us(launch_args, calls, rounds, no_sync));
  print_row("  tuner select (remembered)", per_call_us(select, calls, rounds, no_sync));
  print_row("  launch on prebuilt args", per_call_us(launch_only, launches, rounds, sync));
  fmt::print("  (the forward's config: {}; tensor maps: {})\n", chosen.config.str(),
             chosen.kernel->generated().tensor_maps.size());
  ForwardPlan plan(dev.q, dev.k, dev.v, dev.o, dev.lse, options);
  const ForwardAddresses dev_addresses{dev.q.data, dev.k.data, dev.v.data, dev.o.data, dev.lse.data};
  auto plan_run = [&] { plan.run(dev_addresses, nullptr, rt::AutotuneMode::Off); };
  print_row("plan run", per_call_us(plan_run, launches, rounds, sync));
  return 0;
}
