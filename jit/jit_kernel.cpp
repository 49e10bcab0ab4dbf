#include "jit/jit_kernel.h"

#include "dsl/printer.h"
#include "jit/compile_request.h"
#include "jit/tensor_map_args.h"
#include "runtime/compile_cache.h"
#include "runtime/device.h"
#include "runtime/dump.h"

#include <cstring>
#include <limits>

namespace kiln {

std::shared_ptr<JitKernel> JitKernel::compile(const Kernel& k, const std::string& arch_in,
                                              const CodegenOptions& options) {
  std::string arch = arch_in.empty() ? rt::current_device().arch : arch_in;
  GeneratedKernel generated = generate_cuda(k, Target::parse(arch), options);
  // `options` need no place of their own in the compile cache's key: they act only through the generated
  // source, which the key hashes, so kernels that differ get different keys and a switch that changes
  // nothing for this kernel rightly finds the same entry (and the same loaded module).
  const rt::CompileRequest req = compile_request(generated, arch);
  rt::CompiledKernel compiled = rt::compile_cached(req);
  if (!rt::dump_dir_from_env().empty())
    rt::dump_artifacts(generated.name, {{"cu", req.source}, {"ir", print_kernel(k)}, {"lowered", generated.lowered}});
  return from_compiled(k, std::move(generated), std::move(compiled));
}

std::shared_ptr<JitKernel> JitKernel::from_compiled(const Kernel& k, GeneratedKernel generated,
                                                    rt::CompiledKernel compiled) {
  std::vector<Type> types;
  for (const Param& p : k.params)
    types.push_back(k.type(p.value));
  return load(std::move(generated), std::move(compiled), k.params, std::move(types));
}

std::shared_ptr<JitKernel> JitKernel::load(GeneratedKernel generated, rt::CompiledKernel compiled,
                                           std::vector<Param> params, std::vector<Type> param_types) {
  auto jk = std::make_shared<JitKernel>();
  jk->generated_ = std::move(generated);
  jk->compiled_ = std::move(compiled);
  jk->loaded_ = rt::LoadedKernel::load(jk->compiled_);
  jk->persistent_wave_ = int64_t{jk->generated_.persistent_ctas_per_sm} * rt::current_device().sm_count;
  if (jk->generated_.persistent_dynamic) {
    jk->program_counters_.emplace(kProgramCounters * sizeof(int32_t));
    jk->program_counters_->fill_bytes(0);
    rt::Stream().synchronize(); // the zeros are in place before a launch on any stream reads them
  }
  jk->params_ = std::move(params);
  jk->param_types_ = std::move(param_types);
  return jk;
}

const JitKernel& JitKernel::illegal_maps_kernel() const {
  std::lock_guard<std::mutex> lock(fallback_mutex_);
  if (!fallback_) {
    const GeneratedKernel& g = *generated_.illegal_maps_fallback;
    const rt::CompileRequest req = compile_request(g, compiled_.arch);
    rt::CompiledKernel compiled = rt::compile_cached(req);
    if (!rt::dump_dir_from_env().empty())
      rt::dump_artifacts(g.name, {{"cu", req.source}, {"lowered", g.lowered}});
    fallback_ = load(g, std::move(compiled), params_, param_types_);
  }
  return *fallback_;
}

namespace {

// Kernel arguments as the driver wants them: one host slot per parameter, of the parameter's size.
struct PackedArgs {
  std::vector<std::array<uint8_t, 8>> slots;
  std::vector<void*> pointers;
};

template <typename T> void put(std::array<uint8_t, 8>& slot, T v) { std::memcpy(slot.data(), &v, sizeof(T)); }

PackedArgs pack(const std::string& kernel, const std::vector<Param>& params, const std::vector<Type>& types,
                const std::vector<LaunchArg>& args) {
  if (args.size() != params.size()) {
    // Name the parameters and the first one missing (or how many are extra), not only the counts.
    std::string names;
    for (const Param& p : params)
      names += (names.empty() ? "" : ", ") + p.name;
    std::string what = args.size() < params.size()
                           ? fmt::format("missing '{}'", params[args.size()].name)
                           : fmt::format("{} extra", args.size() - params.size());
    fail("kernel '{}' takes {} arguments ({}), got {}: {}", kernel, params.size(), names, args.size(), what);
  }
  PackedArgs packed;
  packed.slots.resize(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    const Type& t = types[i];
    const LaunchArg& a = args[i];
    const std::string& name = params[i].name;
    if (t.is_pointer()) {
      if (a.kind != LaunchArg::Kind::Pointer)
        fail("kernel '{}': argument '{}' is a pointer to {}, got a scalar", kernel, name, dtype_name(t.elem));
      put(packed.slots[i], a.ptr);
      continue;
    }
    if (a.kind == LaunchArg::Kind::Pointer)
      fail("kernel '{}': argument '{}' is a scalar {}, got a pointer", kernel, name, dtype_name(t.elem));
    switch (t.elem) {
    case DType::i32:
      if (a.kind != LaunchArg::Kind::Int || a.i < std::numeric_limits<int32_t>::min() ||
          a.i > std::numeric_limits<int32_t>::max())
        fail("kernel '{}': argument '{}' is an i32, got {}", kernel, name,
             a.kind == LaunchArg::Kind::Int ? std::to_string(a.i) + " (out of range)" : "a float");
      put(packed.slots[i], static_cast<int32_t>(a.i));
      break;
    case DType::i64:
      if (a.kind != LaunchArg::Kind::Int)
        fail("kernel '{}': argument '{}' is an i64, got a float", kernel, name);
      put(packed.slots[i], a.i);
      break;
    case DType::f32:
      put(packed.slots[i], static_cast<float>(a.kind == LaunchArg::Kind::Float ? a.f : static_cast<double>(a.i)));
      break;
    default: throw InternalError("unsupported scalar parameter type");
    }
  }
  for (auto& s : packed.slots)
    packed.pointers.push_back(s.data());
  return packed;
}

} // namespace

void check_launch_args(const Kernel& k, const std::vector<LaunchArg>& args) {
  std::vector<Type> types;
  for (const Param& p : k.params)
    types.push_back(k.type(p.value));
  pack(k.name, k.params, types, args);
}

void JitKernel::launch(const Grid& grid, const std::vector<LaunchArg>& args, const rt::Stream& stream) const {
  check_grid(name(), grid);
  PackedArgs packed = pack(name(), params_, param_types_, args);
  TensorMapArgs tma;
  if (!generated_.tensor_maps.empty()) {
    tma = tensor_map_args(generated_.tensor_maps, params_, args);
    if (!tma.use_tma && generated_.illegal_maps_fallback)
      return illegal_maps_kernel().launch(grid, args, stream);
    for (rt::CUtensorMap& m : tma.maps)
      packed.pointers.push_back(&m);
    packed.pointers.push_back(&tma.use_tma);
  }
  // A persistent grid: one wave of CTAs (MIN_BLOCKS_PER_SM an SM) walks the grid's program ids along x.
  int64_t ctas_x = grid[0];
  int32_t programs = static_cast<int32_t>(grid[0]); // check_grid: x fits CUDA's (31-bit) limit
  rt::CUdeviceptr counter = 0;
  if (persistent_wave_ > 0) {
    ctas_x = std::min(grid[0], persistent_wave_); // <= programs, as kiln::draw_program's count of draws needs
    packed.pointers.push_back(&programs);
    if (program_counters_) {
      if (grid[1] != 1 || grid[2] != 1) // every row of CTAs would draw from the one counter
        fail("kernel '{}' (PERSISTENT=2) walks program ids along x only; got grid ({}, {}, {})", name(), grid[0],
             grid[1], grid[2]);
      counter = program_counters_->ptr() + (launches_.fetch_add(1) % kProgramCounters) * sizeof(int32_t);
      packed.pointers.push_back(&counter);
    }
  }
  loaded_->launch(rt::Dim3{static_cast<unsigned>(ctas_x), static_cast<unsigned>(grid[1]), static_cast<unsigned>(grid[2])},
                  rt::Dim3{static_cast<unsigned>(generated_.threads), 1, 1},
                  static_cast<size_t>(generated_.shared_bytes), packed.pointers.data(), stream);
}

void run_on_gpu(const JitKernel& kernel, const Grid& grid, llvm::ArrayRef<InterpArg> args) {
  std::vector<rt::DeviceBuffer> buffers;
  std::vector<LaunchArg> launch_args;
  const auto& types = kernel.param_types();
  if (args.size() != types.size())
    fail("kernel '{}' takes {} arguments, got {}", kernel.name(), types.size(), args.size());
  buffers.reserve(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    if (types[i].is_pointer()) {
      if (!args[i].buffer)
        fail("kernel '{}': argument '{}' needs a buffer", kernel.name(), kernel.params()[i].name);
      HostBuffer& hb = *args[i].buffer;
      buffers.emplace_back(std::max<size_t>(hb.bytes.size(), 16));
      buffers.back().copy_from_host(hb.bytes.data(), hb.bytes.size());
      launch_args.push_back(LaunchArg::pointer(buffers.back()));
    } else if (is_float(types[i].elem)) {
      launch_args.push_back(LaunchArg::of_float(args[i].f));
    } else {
      launch_args.push_back(LaunchArg::of_int(args[i].i));
    }
  }
  rt::Stream stream;
  kernel.launch(grid, launch_args, stream);
  size_t b = 0;
  for (size_t i = 0; i < args.size(); ++i)
    if (types[i].is_pointer()) {
      HostBuffer& hb = *args[i].buffer;
      buffers[b++].copy_to_host(hb.bytes.data(), hb.bytes.size());
    }
}

} // namespace kiln
