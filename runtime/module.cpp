// Module loading, per-context module caching and kernel launches.
#include "runtime/module.h"

#include "support/error.h"
#include "support/hash.h"

#include <map>
#include <mutex>

namespace kiln::rt {

struct LoadedKernel::Private {};

namespace {
// Without opt-in every device gives a block at most this much dynamic shared memory.
constexpr int64_t kDefaultDynamicSmemLimit = 48 * 1024;
constexpr int64_t kCarveoutThreshold = 16 * 1024; // dynamic shared bytes above which the carveout is maximised
} // namespace

std::shared_ptr<LoadedKernel> LoadedKernel::load(const CompiledKernel& kernel) {
  if (kernel.cubin.empty())
    fail("cannot load kernel '{}': it has no cubin (was it compiled?)", kernel.kernel_name);
  const DeviceInfo& device = current_device();
  CUcontext ctx = make_context_current(device.ordinal);
  std::string key = !kernel.cache_key.empty() ? kernel.cache_key
                                              : HashBuilder().add(kernel.lowered_name).add(kernel.cubin).hex();

  static std::mutex mutex;
  static std::map<std::pair<CUcontext, std::string>, std::shared_ptr<LoadedKernel>> loaded;
  std::lock_guard lock(mutex);  // held across the load: loading twice would leak a module
  auto& slot = loaded[{ctx, key}];
  if (!slot)
    slot = std::make_shared<LoadedKernel>(Private{}, kernel);
  return slot;
}

LoadedKernel::LoadedKernel(const Private&, const CompiledKernel& kernel)
    : name_(kernel.kernel_name), arch_(kernel.arch), ordinal_(current_device().ordinal) {
  Driver& d = driver();
  const DeviceInfo& device = current_device();
  char error_log[8192] = {};
  int options[] = {cu::kJitErrorLogBuffer, cu::kJitErrorLogBufferSizeBytes};
  void* values[] = {error_log, reinterpret_cast<void*>(static_cast<uintptr_t>(sizeof(error_log)))};
  if (CUresult r = d.cuModuleLoadDataEx(&module_, kernel.cubin.data(), 2, options, values); r != cu::kSuccess)
    fail("cuModuleLoadDataEx failed: {} while loading kernel '{}' (compiled for {}) on device {} '{}' ({}){}{}",
         d.describe(r), name_, kernel.arch, device.ordinal, device.name, device.arch,
         error_log[0] ? ": " : "", error_log);
  const std::string& symbol = kernel.lowered_name.empty() ? kernel.kernel_name : kernel.lowered_name;
  if (CUresult r = d.cuModuleGetFunction(&function_, module_, symbol.c_str()); r != cu::kSuccess) {
    d.cuModuleUnload(module_);
    fail("cuModuleGetFunction failed: {} while looking up kernel '{}' (symbol '{}') in its module",
         d.describe(r), name_, symbol);
  }
  // Without opt-in, static and dynamic shared memory together may not pass 48 KiB: a kernel with static
  // barriers (TMA rings) and 48 KiB of tiles must opt in although its dynamic part alone is within it.
  int static_smem = 0;
  if (CUresult r = d.cuFuncGetAttribute(&static_smem, cu::kFuncAttrSharedSizeBytes, function_); r != cu::kSuccess) {
    d.cuModuleUnload(module_);
    fail("cuFuncGetAttribute(SHARED_SIZE_BYTES) failed: {} for kernel '{}'", d.describe(r), name_);
  }
  dynamic_smem_limit_ = kDefaultDynamicSmemLimit - static_smem;
}

LoadedKernel::~LoadedKernel() {
  if (module_)
    driver().cuModuleUnload(module_);
}

std::string LoadedKernel::describe_launch(Dim3 grid, Dim3 block, size_t dynamic_smem) const {
  return fmt::format("launching kernel '{}' with grid ({}, {}, {}), block ({}, {}, {}), {} bytes dynamic shared "
                     "memory",
                     name_, grid.x, grid.y, grid.z, block.x, block.y, block.z, dynamic_smem);
}

void LoadedKernel::launch(Dim3 grid, Dim3 block, size_t dynamic_smem, void** args, const Stream& stream) const {
  Driver& d = driver();
  make_context_current(ordinal_);
  if (grid.count() == 0 || block.count() == 0)
    fail("cannot launch kernel '{}': grid ({}, {}, {}) and block ({}, {}, {}) must have no zero dimension",
         name_, grid.x, grid.y, grid.z, block.x, block.y, block.z);
  int64_t smem = static_cast<int64_t>(dynamic_smem);
  if (smem > dynamic_smem_limit_.load()) {
    const DeviceInfo& device = current_device();
    int static_smem = 0;
    d.check(d.cuFuncGetAttribute(&static_smem, cu::kFuncAttrSharedSizeBytes, function_), "cuFuncGetAttribute",
            describe_launch(grid, block, dynamic_smem));
    int64_t room = device.max_shared_per_block_optin - static_smem;
    if (smem > room)
      fail("kernel '{}' asks for {} bytes of dynamic shared memory, but device {} '{}' allows at most {} per block "
           "({} opt-in limit less {} bytes of static shared memory); use smaller tiles or fewer stages",
           name_, smem, device.ordinal, device.name, room, device.max_shared_per_block_optin, static_smem);
    d.check(d.cuFuncSetAttribute(function_, cu::kFuncAttrMaxDynamicSharedSizeBytes, static_cast<int>(smem)),
            "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)", describe_launch(grid, block, dynamic_smem));
    // Racing launches may both set it; the attribute only ever grows, so the larger value wins either way.
    int64_t seen = dynamic_smem_limit_.load();
    while (seen < smem && !dynamic_smem_limit_.compare_exchange_weak(seen, smem)) {
    }
  }
  // Kernels that stage tiles in shared memory prefer the largest carveout: left to the driver, an H200
  // gave a kernel with 48 KiB of tiles a 64 KiB carveout, so a second CTA could never be resident
  // (ncu). Kernels with little shared memory keep the driver's choice, which leaves them more L1
  // (vector add lost a quarter of its bandwidth under the maximum carveout).
  if (smem > kCarveoutThreshold && !carveout_set_.exchange(true))
    d.check(d.cuFuncSetAttribute(function_, cu::kFuncAttrPreferredSharedMemoryCarveout, 100),
            "cuFuncSetAttribute(PREFERRED_SHARED_MEMORY_CARVEOUT)", describe_launch(grid, block, dynamic_smem));
  CUresult r = d.cuLaunchKernel(function_, grid.x, grid.y, grid.z, block.x, block.y, block.z,
                                static_cast<unsigned>(dynamic_smem), stream.handle(), args, nullptr);
  if (r != cu::kSuccess) {
    std::string hint;
    int max_threads = 0;
    if (d.cuFuncGetAttribute(&max_threads, cu::kFuncAttrMaxThreadsPerBlock, function_) == cu::kSuccess &&
        block.count() > static_cast<uint64_t>(max_threads))
      hint = fmt::format(" (this kernel allows at most {} threads per block)", max_threads);
    d.check(r, "cuLaunchKernel", describe_launch(grid, block, dynamic_smem) + hint);
  }
}

ResourceUsage LoadedKernel::function_usage() const {
  Driver& d = driver();
  make_context_current(ordinal_);
  auto attr = [&](int attribute) {
    int value = 0;
    d.check(d.cuFuncGetAttribute(&value, attribute, function_), "cuFuncGetAttribute",
            fmt::format("reading attribute {} of kernel '{}'", attribute, name_));
    return value;
  };
  ResourceUsage u;
  u.registers = attr(cu::kFuncAttrNumRegs);
  u.shared_bytes = attr(cu::kFuncAttrSharedSizeBytes);
  u.constant_bytes = attr(cu::kFuncAttrConstSizeBytes);
  u.local_bytes = attr(cu::kFuncAttrLocalSizeBytes);
  u.max_threads_per_block = attr(cu::kFuncAttrMaxThreadsPerBlock);
  return u;
}

} // namespace kiln::rt
