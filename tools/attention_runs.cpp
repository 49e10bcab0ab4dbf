#include "tools/attention_runs.h"

#include "jit/jit_kernel.h"
#include "kernels/attention/attention_api.h"
#include "kernels/attention/attention_block_mask.h"
#include "kernels/attention/attention_block_mask_host.h"
#include "kernels/attention/fa2_fwd.h"
#include "runtime/device.h"
#include "runtime/timing.h"
#include "support/error.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

namespace kiln::cli {

rt::DeviceBuffer upload(const HostBuffer& b) {
  rt::DeviceBuffer d(std::max<size_t>(b.bytes.size(), 16));
  d.copy_from_host(b.bytes.data(), b.bytes.size());
  return d;
}

HostBuffer download(const rt::DeviceBuffer& d, DType dtype, int64_t numel) {
  HostBuffer h(dtype, numel);
  d.copy_to_host(h.bytes.data(), h.bytes.size());
  return h;
}

int parse_causal(const std::string& text, const char* flag) {
  if (text == "none")
    return 0;
  if (text == "top-left")
    return 1;
  if (text == "bottom-right")
    return 2;
  fail("{} must be none, top-left or bottom-right; got '{}'", flag, text);
}

const char* causal_name(int causal) {
  switch (causal) {
  case 1:
    return "top-left";
  case 2:
    return "bottom-right";
  default:
    return "none";
  }
}

DType parse_attention_dtype(const std::string& text, const char* flag) {
  if (text == "f16")
    return DType::f16;
  if (text == "bf16")
    return DType::bf16;
  if (text == "f32")
    return DType::f32;
  fail("{} must be f16, bf16 or f32; got '{}'", flag, text);
}

GpuTiming time_fa2_on_gpu(const AttentionProblem& p, const Config& config, const AttentionInputs& in,
                          int warmup, int reps, const AttentionMods& mods,
                          const ModTensorValues& mod_tensors, const HostBlockMask* block_mask) {
  if (reps < 1 || warmup < 0)
    fail("timing needs at least 1 repetition and no negative warmup; got {} and {}", reps, warmup);
  // fa2_fwd_def() itself without mods or a block mask
  const KernelDef& def = block_mask ? fa2_fwd_block_mask_def(mods) : fa2_fwd_def(mods);
  check_mod_tensors(mods, mod_tensors, p);
  if (block_mask)
    check_block_mask(block_mask->layout, p, mods, &config);
  std::shared_ptr<JitKernel> kernel = JitKernel::compile(def.build(config));
  AttentionInputs inputs = in;
  AttentionOutputs outputs = make_outputs(p);
  ModTensorValues mod_inputs = mod_tensors;
  std::vector<InterpArg> host_args = fa2_interp_args(p, inputs, outputs);
  const std::vector<InterpArg> mod_args = mod_interp_args(p, mods, mod_inputs); // after the kernel's own
  host_args.insert(host_args.end(), mod_args.begin(), mod_args.end());
  HostBlockMask lists = block_mask ? *block_mask : HostBlockMask{}; // the block mask's lists after the mods'
  if (block_mask)
    for (HostBuffer* b : {&lists.full_count, &lists.full_index, &lists.partial_count, &lists.partial_index})
      host_args.push_back(InterpArg::ptr(*b));

  // Device copies of every buffer argument; scalars pass by value, typed by the kernel's parameters.
  std::vector<rt::DeviceBuffer> buffers;
  buffers.reserve(host_args.size());
  std::vector<LaunchArg> args;
  const std::vector<Type>& types = kernel->param_types();
  KILN_INTERNAL_CHECK(types.size() == host_args.size(), "{} takes {} arguments, {} given", def.name,
                      types.size(), host_args.size());
  for (size_t i = 0; i < host_args.size(); ++i) {
    const InterpArg& a = host_args[i];
    if (a.buffer) {
      buffers.emplace_back(a.buffer->bytes.size());
      buffers.back().copy_from_host(a.buffer->bytes.data(), a.buffer->bytes.size());
      args.push_back(LaunchArg::pointer(buffers.back()));
    } else if (is_float(types[i].elem)) {
      args.push_back(LaunchArg::of_float(a.f));
    } else {
      args.push_back(LaunchArg::of_int(a.i));
    }
  }
  const Grid grid = def.grid(config, attention_size_args(p));
  return timing_of(rt::time_kernel_runs_ms([&](rt::Stream& stream) { kernel->launch(grid, args, stream); },
                                           rt::TimingOptions{warmup, reps, false}));
}

GpuTiming timing_of(std::vector<double> ms) {
  KILN_INTERNAL_CHECK(!ms.empty(), "a timing needs at least one run");
  std::sort(ms.begin(), ms.end());
  GpuTiming t;
  t.reps = static_cast<int>(ms.size());
  t.min_ms = ms.front();
  t.max_ms = ms.back();
  t.median_ms = ms.size() % 2 ? ms[ms.size() / 2] : (ms[ms.size() / 2 - 1] + ms[ms.size() / 2]) / 2;
  return t;
}

std::string bench_line(const std::string& what, const GpuTiming& t, double flops) {
  return fmt::format("bench{}{}: median {:.4f} ms (min {:.4f}, max {:.4f}, {} runs), {:.1f} TFLOP/s\n",
                     what.empty() ? "" : " ", what, t.median_ms, t.min_ms, t.max_ms, t.reps,
                     flops / (t.median_ms * 1e-3) / 1e12);
}

GpuTiming time_gpu_calls(const std::function<void()>& fn, int reps) {
  if (reps < 1)
    fail("timing needs at least 1 repetition; got {}", reps);
  const rt::Stream stream; // the legacy default stream, which the API calls launch on
  fn();
  std::vector<double> ms;
  for (int i = 0; i < reps; ++i) {
    rt::Event start, end;
    start.record(stream);
    fn();
    end.record(stream);
    end.synchronize();
    ms.push_back(rt::Event::elapsed_ms(start, end));
  }
  return timing_of(std::move(ms));
}

// The autotuner's choice for the problem, as kiln::attention::forward makes it, on device copies of the
// inputs (tuning writes scratch outputs only).
TunedLaunch autotuned_launch(const AttentionProblem& p, const AttentionInputs& in,
                             std::optional<rt::AutotuneMode> mode) {
  auto upload = [](const HostBuffer& b) {
    rt::DeviceBuffer d(b.bytes.size());
    d.copy_from_host(b.bytes.data(), b.bytes.size());
    return d;
  };
  rt::DeviceBuffer q = upload(in.q), k = upload(in.k), v = upload(in.v), o(in.q.bytes.size());
  auto shape = [&](int64_t h, int64_t n) {
    return p.bshd_layout ? llvm::SmallVector<int64_t, 4>{p.B, n, h, p.D}
                         : llvm::SmallVector<int64_t, 4>{p.B, h, n, p.D};
  };
  using attention::TensorRef;
  attention::AttentionOptions options;
  options.causal = static_cast<attention::Causal>(p.causal);
  options.k_transposed = p.k_transposed;
  options.tf32 = p.tf32;
  options.exact_masked_v = p.exact_masked_v;
  options.sm_scale = p.sm_scale;
  options.layout = p.bshd_layout ? "bshd" : "bhsd";
  return attention::tune_forward(TensorRef::contiguous(q.ptr(), p.dtype, shape(p.H, p.N_Q)),
                                 TensorRef::contiguous(k.ptr(), p.dtype, shape(p.H_KV, p.N_K)),
                                 TensorRef::contiguous(v.ptr(), p.dtype, shape(p.H_KV, p.N_K)),
                                 TensorRef::contiguous(o.ptr(), p.dtype, shape(p.H, p.N_Q)), std::nullopt,
                                 options, mode);
}

} // namespace kiln::cli
