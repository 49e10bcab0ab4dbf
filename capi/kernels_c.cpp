// The C ABI over kiln's kernel registry: listing the builtin kernels, emitting one at a stage, and running
// one by name on tensors and scalars, in the interpreter (host memory) or on the GPU (device memory).
#include "capi/c_boundary.h"
#include "codegen/codegen.h"
#include "dsl/printer.h"
#include "jit/compile_offline.h"
#include "jit/jit_kernel.h"
#include "jit/tuned_kernel.h"
#include "kernels/builtin.h"
#include "runtime/cuda_driver.h"

#include <llvm/Support/FormatVariadic.h>
#include <llvm/Support/JSON.h>

#include <algorithm>
#include <cstring>
#include <mutex>

namespace kiln::capi {
namespace {

// A tensor bound to a pointer parameter: where its elements lie, and how many from there the kernel may reach.
struct BoundTensor {
  uint8_t* data = nullptr;
  DType dtype = DType::f32;
  int64_t span = 0; // elements from `data` to the last one the strides reach, plus one
  std::string name; // the parameter's, for the interpreter's out-of-bounds errors
};

// A registered kernel built for a config, with its arguments bound in parameter order and its grid.
struct BoundLaunch {
  Kernel kernel;
  Grid grid{1, 1, 1};
  std::vector<LaunchArg> args;      // pointers carry the tensors' addresses
  std::vector<BoundTensor> tensors; // one per pointer parameter, in order
  Config config;                    // the default with the caller's overrides
  SizeArgs sizes;                   // the size arguments among the scalars
};

std::string join(const std::vector<std::string>& items) {
  std::string out;
  for (const std::string& s : items)
    out += (out.empty() ? "" : ", ") + s;
  return out.empty() ? "(none)" : out;
}

BoundTensor bind_tensor(const kiln_tensor& t, const std::string& kernel, const Param& param, DType elem) {
  const std::string what = fmt::format("tensor for '{}'", param.name);
  const attention::TensorRef r = tensor_ref(t, what.c_str());
  if (r.dtype != elem)
    fail("kernel '{}': parameter '{}' points to {}; the tensor given for it is {}", kernel, param.name,
         dtype_name(elem), dtype_name(r.dtype));
  if (r.data == 0)
    fail("kernel '{}': the tensor given for '{}' has a null data pointer", kernel, param.name);
  int64_t span = 1;
  for (size_t d = 0; d < r.shape.size(); ++d) {
    if (r.shape[d] < 0 || r.strides[d] < 0)
      fail("kernel '{}': the tensor for '{}' has a negative size or stride ({})", kernel, param.name, r.str());
    if (r.shape[d] == 0)
      span = 0;
  }
  if (span != 0)
    for (size_t d = 0; d < r.shape.size(); ++d)
      span += (r.shape[d] - 1) * r.strides[d];
  return BoundTensor{reinterpret_cast<uint8_t*>(r.data), r.dtype, span, param.name};
}

BoundLaunch bind(const char* kernel_name, const kiln_tensor* tensors, int32_t num_tensors,
                 const kiln_scalar* scalars, int32_t num_scalars, const kiln_param* params, int32_t num_params,
                 const int64_t* grid) {
  if (kernel_name == nullptr)
    throw InvalidArgument("kernel must not be NULL");
  if (num_tensors < 0 || num_scalars < 0)
    throw InvalidArgument(fmt::format("num_tensors and num_scalars must be >= 0; got {} and {}", num_tensors,
                                      num_scalars));
  if ((num_tensors > 0 && tensors == nullptr) || (num_scalars > 0 && scalars == nullptr))
    throw InvalidArgument("tensors and scalars must not be NULL when their counts are > 0");
  const KernelDef& def = builtin_kernels().find(kernel_name);
  const Config config = def.with_overrides(def.default_config(), param_overrides(params, num_params));

  std::map<std::string, const kiln_scalar*> by_name;
  for (int32_t i = 0; i < num_scalars; ++i) {
    if (scalars[i].name == nullptr)
      throw InvalidArgument(fmt::format("scalars[{}].name must not be NULL", i));
    if (!by_name.emplace(scalars[i].name, &scalars[i]).second)
      fail("kernel '{}': scalar '{}' is given twice", def.name, scalars[i].name);
  }

  BoundLaunch b{def.build(config), {1, 1, 1}, {}, {}, config, {}};
  std::vector<std::string> pointer_params, scalar_params;
  for (const Param& p : b.kernel.params) {
    const Type& t = b.kernel.values[p.value].type;
    (t.is_pointer() ? pointer_params : scalar_params).push_back(p.name + " " + std::string(dtype_name(t.elem)));
  }
  if (static_cast<size_t>(num_tensors) != pointer_params.size())
    fail("kernel '{}' takes {} tensor(s) ({}); got {}", def.name, pointer_params.size(), join(pointer_params),
         num_tensors);
  int32_t next_tensor = 0;
  for (const Param& p : b.kernel.params) {
    const Type& t = b.kernel.values[p.value].type;
    if (t.is_pointer()) {
      b.tensors.push_back(bind_tensor(tensors[next_tensor++], def.name, p, t.elem));
      b.args.push_back(LaunchArg::pointer(reinterpret_cast<uint64_t>(b.tensors.back().data)));
      continue;
    }
    auto it = by_name.find(p.name);
    if (it == by_name.end())
      fail("kernel '{}' needs the scalar '{}' ({}); its scalars are: {}", def.name, p.name, dtype_name(t.elem),
           join(scalar_params));
    const kiln_scalar& s = *it->second;
    if (is_float(t.elem))
      b.args.push_back(LaunchArg::of_float(s.is_float ? s.f : static_cast<double>(s.i)));
    else if (!s.is_float)
      b.args.push_back(LaunchArg::of_int(s.i));
    else
      fail("kernel '{}': scalar '{}' is {}, an integer; got the float {}", def.name, p.name, dtype_name(t.elem), s.f);
  }
  check_launch_args(b.kernel, b.args); // ranges of the scalars, as a GPU launch checks them

  SizeArgs& sizes = b.sizes;
  for (const std::string& name : def.size_args)
    if (auto it = by_name.find(name); it != by_name.end()) {
      if (it->second->is_float)
        fail("kernel '{}': size argument '{}' must be an integer; got {}", def.name, name, it->second->f);
      sizes[name] = it->second->i;
    }
  for (const auto& [name, s] : by_name) {
    const bool is_param = std::any_of(b.kernel.params.begin(), b.kernel.params.end(),
                                      [&](const Param& p) { return p.name == name; });
    if (!is_param && !sizes.count(name))
      fail("kernel '{}' has no scalar or size argument '{}'; its scalars are: {}; its size arguments: {}", def.name,
           name, join(scalar_params), join(def.size_args));
  }
  if (grid != nullptr) {
    b.grid = {grid[0], grid[1], grid[2]};
  } else {
    std::vector<std::string> missing;
    for (const std::string& name : def.size_args)
      if (!sizes.count(name))
        missing.push_back(name);
    if (!missing.empty())
      fail("kernel '{}' computes its grid from {}; give {} as scalar(s), or give the grid", def.name,
           join(def.size_args), join(missing));
    if (!def.grid)
      fail("kernel '{}' has no grid rule; give the grid", def.name);
    b.grid = def.grid(config, sizes);
  }
  check_grid(def.name, b.grid);
  return b;
}

std::string list_json() {
  llvm::json::Array kernels;
  for (const KernelDef& d : builtin_kernels().all()) {
    llvm::json::Array params;
    for (const ParamDef& p : d.params)
      params.push_back(llvm::json::Object{
          {"name", p.name}, {"default", p.default_value}, {"takes", p.expected()}, {"help", p.help}});
    llvm::json::Array size_args;
    for (const std::string& s : d.size_args)
      size_args.push_back(s);
    kernels.push_back(llvm::json::Object{{"name", d.name},
                                         {"summary", d.summary},
                                         {"params", std::move(params)},
                                         {"size_args", std::move(size_args)},
                                         {"num_warps", d.default_num_warps},
                                         {"num_stages", d.default_num_stages}});
  }
  return llvm::formatv("{0}", llvm::json::Value(std::move(kernels))).str();
}

// The arch `kiln emit` defaults to: the current device's, else sm_90a.
std::string default_arch() {
  if (rt::driver_available() && rt::device_count() > 0)
    return rt::current_device().arch;
  return "sm_90a";
}

std::string emit(const char* kernel, const char* stage, const char* arch, const kiln_param* params,
                 int32_t num_params) {
  if (kernel == nullptr || stage == nullptr)
    throw InvalidArgument("kernel and stage must not be NULL");
  const KernelDef& def = builtin_kernels().find(kernel);
  const Config config = def.with_overrides(def.default_config(), param_overrides(params, num_params));
  const std::string s = stage;
  if (s != "ir" && s != "lowered" && s != "cuda" && s != "ptx")
    fail("stage must be one of ir, lowered, cuda, ptx; got '{}'", s);
  const Target target = Target::parse(arch != nullptr && *arch != '\0' ? std::string(arch) : default_arch());
  const Kernel k = def.build(config);
  if (s == "ir")
    return print_kernel(k);
  if (s == "cuda")
    return generate_cuda(k, target).source;
  if (s == "lowered") {
    const GeneratedKernel g = generate_cuda(k, target);
    return print_kernel(k) + "\n" + g.lowered + (g.lowered.ends_with("\n") ? "" : "\n");
  }
  rt::validate_arch(target.arch());
  return compile_offline(k, target.arch()).compiled.ptx;
}

// Kernels compiled for the GPU, per kernel, config and device, kept for the process (a JitKernel also sits in
// the compile cache on disk, but loading it into the context each call would cost a module load).
std::shared_ptr<JitKernel> compiled_for_device(const Kernel& k) {
  static std::mutex mutex;
  static std::map<std::string, std::shared_ptr<JitKernel>> compiled;
  const std::string key = fmt::format("{}|{}|{}", k.name, k.config.str(), rt::current_device().ordinal);
  std::lock_guard<std::mutex> lock(mutex);
  std::shared_ptr<JitKernel>& slot = compiled[key];
  if (!slot)
    slot = JitKernel::compile(k);
  return slot;
}

} // namespace
} // namespace kiln::capi

using namespace kiln;
using namespace kiln::capi;

extern "C" {

kiln_status kiln_list_kernels(const char** json) {
  return guarded([&] {
    require(json, "json");
    *json = return_string(list_json());
  });
}

kiln_status kiln_emit(const char* kernel, const char* stage, const char* arch, const kiln_param* params,
                      int32_t num_params, const char** text) {
  return guarded([&] {
    require(text, "text");
    *text = return_string(emit(kernel, stage, arch, params, num_params));
  });
}

kiln_status kiln_run_host(const char* kernel, const kiln_tensor* tensors, int32_t num_tensors,
                          const kiln_scalar* scalars, int32_t num_scalars, const kiln_param* params,
                          int32_t num_params, const int64_t* grid) {
  return guarded([&] {
    BoundLaunch b = bind(kernel, tensors, num_tensors, scalars, num_scalars, params, num_params, grid);
    // The interpreter works on its own buffers: copy each tensor's span in, run, copy every span back.
    std::vector<HostBuffer> buffers;
    buffers.reserve(b.tensors.size());
    for (const BoundTensor& t : b.tensors) {
      buffers.emplace_back(t.dtype, t.span, t.name);
      std::memcpy(buffers.back().bytes.data(), t.data, buffers.back().bytes.size());
    }
    std::vector<InterpArg> args;
    size_t next = 0;
    for (const LaunchArg& a : b.args) {
      if (a.kind == LaunchArg::Kind::Pointer)
        args.push_back(InterpArg::ptr(buffers[next++]));
      else
        args.push_back(a.kind == LaunchArg::Kind::Float ? InterpArg::of_float(a.f) : InterpArg::of_int(a.i));
    }
    interpret(b.kernel, b.grid, args);
    for (size_t i = 0; i < b.tensors.size(); ++i)
      std::memcpy(b.tensors[i].data, buffers[i].bytes.data(), buffers[i].bytes.size());
  });
}

kiln_status kiln_tune_cuda(const char* kernel, const kiln_tensor* tensors, int32_t num_tensors,
                           const kiln_scalar* scalars, int32_t num_scalars, const kiln_param* params,
                           int32_t num_params, int32_t autotune, const char** json) {
  return guarded([&] {
    require(json, "json");
    *json = nullptr;
    // KILN_AUTOTUNE_ENV tunes now (force), as `kiln tune` does; another mode is taken as given.
    const std::optional<rt::AutotuneMode> given = autotune_mode(autotune, "autotune");
    const BoundLaunch b = bind(kernel, tensors, num_tensors, scalars, num_scalars, params, num_params, nullptr);
    std::string why;
    if (!rt::driver_available(&why))
      throw Unavailable(std::string("kiln_tune_cuda needs a GPU: ") + why);
    const KernelDef& def = builtin_kernels().find(kernel);
    // Every tensor may be written: the timing launches get scratch copies of them all.
    std::vector<OutputArg> outputs;
    size_t tensor = 0;
    for (size_t i = 0; i < b.args.size(); ++i)
      if (b.args[i].kind == LaunchArg::Kind::Pointer) {
        const BoundTensor& t = b.tensors[tensor++];
        if (t.span > 0)
          outputs.push_back({i, static_cast<size_t>(t.span * dtype_bytes(t.dtype)), 0});
      }
    TuneOptions options;
    options.mode = given ? given : rt::AutotuneMode::Force;
    static KernelTuner tuner; // picks kept for the process, as kiln_run_cuda keeps its kernels
    const TunedLaunch chosen = tuner.select(def, b.config, b.sizes, b.args, outputs, options);
    *json = return_string(tuned_launch_json(def.name, chosen));
  });
}

kiln_status kiln_run_cuda(const char* kernel, const kiln_tensor* tensors, int32_t num_tensors,
                          const kiln_scalar* scalars, int32_t num_scalars, const kiln_param* params,
                          int32_t num_params, const int64_t* grid, void* stream) {
  return guarded([&] {
    const BoundLaunch b = bind(kernel, tensors, num_tensors, scalars, num_scalars, params, num_params, grid);
    std::string why;
    if (!rt::driver_available(&why))
      throw Unavailable(std::string("kiln_run_cuda needs a GPU: ") + why);
    compiled_for_device(b.kernel)->launch(b.grid, b.args, rt::Stream::wrap(stream));
  });
}

} // extern "C"
