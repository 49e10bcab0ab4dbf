// Loading libcuda with dlopen and checking driver results.
#include "runtime/cuda_driver.h"

#include "support/error.h"

#include <dlfcn.h>

#include <memory>
#include <mutex>
#include <vector>

namespace kiln::rt {

namespace {

// The outcome of the one attempt to load the driver: either a driver or the reason there is none.
struct DriverLoad {
  std::unique_ptr<Driver> driver;
  std::string error;
};

template <typename Fn>
void resolve(void* lib, const char* symbol, Fn& slot, std::vector<std::string>& missing) {
  void* address = dlsym(lib, symbol);
  if (!address)
    missing.push_back(symbol);
  slot = reinterpret_cast<Fn>(address);
}

// For functions kiln can do without on old drivers: the slot stays nullptr and the caller that needs it says so.
template <typename Fn> void resolve_optional(void* lib, const char* symbol, Fn& slot) {
  slot = reinterpret_cast<Fn>(dlsym(lib, symbol));
}

DriverLoad load_driver() {
  DriverLoad out;
  const char* candidates[] = {"libcuda.so.1", "libcuda.so"};
  void* lib = nullptr;
  std::string library, errors;
  for (const char* name : candidates) {
    lib = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (lib) {
      library = name;
      break;
    }
    const char* e = dlerror();
    errors += fmt::format("{}{}", errors.empty() ? "" : "; ", e ? e : name);
  }
  if (!lib) {
    out.error = fmt::format("no CUDA driver found: {} (searched libcuda.so.1 and libcuda.so on the loader path: "
                            "LD_LIBRARY_PATH and the ld.so cache; kiln can still compile with NVRTC and "
                            "interpret kernels on the CPU)",
                            errors);
    return out;
  }

  auto d = std::make_unique<Driver>();
  d->library = library;
  std::vector<std::string> missing;
  resolve(lib, "cuInit", d->cuInit, missing);
  resolve(lib, "cuDriverGetVersion", d->cuDriverGetVersion, missing);
  resolve(lib, "cuGetErrorName", d->cuGetErrorName, missing);
  resolve(lib, "cuGetErrorString", d->cuGetErrorString, missing);
  resolve(lib, "cuDeviceGet", d->cuDeviceGet, missing);
  resolve(lib, "cuDeviceGetCount", d->cuDeviceGetCount, missing);
  resolve(lib, "cuDeviceGetName", d->cuDeviceGetName, missing);
  resolve(lib, "cuDeviceGetAttribute", d->cuDeviceGetAttribute, missing);
  resolve(lib, "cuDeviceTotalMem_v2", d->cuDeviceTotalMem, missing);
  resolve(lib, "cuDevicePrimaryCtxRetain", d->cuDevicePrimaryCtxRetain, missing);
  resolve(lib, "cuDevicePrimaryCtxRelease_v2", d->cuDevicePrimaryCtxRelease, missing);
  resolve(lib, "cuCtxSetCurrent", d->cuCtxSetCurrent, missing);
  resolve(lib, "cuCtxGetCurrent", d->cuCtxGetCurrent, missing);
  resolve(lib, "cuCtxSynchronize", d->cuCtxSynchronize, missing);
  resolve(lib, "cuModuleLoadData", d->cuModuleLoadData, missing);
  resolve(lib, "cuModuleLoadDataEx", d->cuModuleLoadDataEx, missing);
  resolve(lib, "cuModuleUnload", d->cuModuleUnload, missing);
  resolve(lib, "cuModuleGetFunction", d->cuModuleGetFunction, missing);
  resolve(lib, "cuFuncSetAttribute", d->cuFuncSetAttribute, missing);
  resolve(lib, "cuFuncGetAttribute", d->cuFuncGetAttribute, missing);
  resolve(lib, "cuLaunchKernel", d->cuLaunchKernel, missing);
  resolve(lib, "cuMemAlloc_v2", d->cuMemAlloc, missing);
  resolve(lib, "cuMemFree_v2", d->cuMemFree, missing);
  resolve(lib, "cuMemcpyHtoD_v2", d->cuMemcpyHtoD, missing);
  resolve(lib, "cuMemcpyDtoH_v2", d->cuMemcpyDtoH, missing);
  resolve(lib, "cuMemcpyDtoD_v2", d->cuMemcpyDtoD, missing);
  resolve(lib, "cuMemsetD8_v2", d->cuMemsetD8, missing);
  resolve(lib, "cuMemsetD8Async", d->cuMemsetD8Async, missing);
  resolve(lib, "cuMemGetInfo_v2", d->cuMemGetInfo, missing);
  resolve(lib, "cuStreamCreate", d->cuStreamCreate, missing);
  resolve(lib, "cuStreamDestroy_v2", d->cuStreamDestroy, missing);
  resolve(lib, "cuStreamSynchronize", d->cuStreamSynchronize, missing);
  resolve(lib, "cuEventCreate", d->cuEventCreate, missing);
  resolve(lib, "cuEventRecord", d->cuEventRecord, missing);
  resolve(lib, "cuEventSynchronize", d->cuEventSynchronize, missing);
  resolve(lib, "cuEventElapsedTime", d->cuEventElapsedTime, missing);
  resolve(lib, "cuEventDestroy_v2", d->cuEventDestroy, missing);
  resolve_optional(lib, "cuTensorMapEncodeTiled", d->cuTensorMapEncodeTiled);
  if (!missing.empty()) {
    std::string list;
    for (const auto& m : missing)
      list += (list.empty() ? "" : ", ") + m;
    out.error = fmt::format("the CUDA driver {} lacks the functions kiln needs ({}); the driver is too old "
                            "for kiln, which needs CUDA 12 or newer",
                            library, list);
    return out;  // the library stays open; unloading a half-used driver buys nothing
  }

  if (CUresult r = d->cuDriverGetVersion(&d->version); r != cu::kSuccess)
    d->version = 0;
  if (CUresult r = d->cuInit(0); r != cu::kSuccess) {
    out.error = fmt::format("a CUDA driver was found ({}, version {}) but cuInit failed: {}", library,
                            d->version, d->describe(r));
    return out;
  }
  out.driver = std::move(d);
  return out;
}

const DriverLoad& driver_load() {
  static const DriverLoad load = load_driver();  // C++ guarantees one thread-safe initialization
  return load;
}

} // namespace

std::string Driver::describe(CUresult result) const {
  const char* name = nullptr;
  const char* text = nullptr;
  if (cuGetErrorName == nullptr || cuGetErrorName(result, &name) != cu::kSuccess || name == nullptr)
    name = "unknown CUresult";
  if (cuGetErrorString == nullptr || cuGetErrorString(result, &text) != cu::kSuccess || text == nullptr)
    text = "no description";
  return fmt::format("{} = {} ({})", name, result, text);
}

void Driver::check(CUresult result, std::string_view call, std::string_view context) const {
  if (result == cu::kSuccess)
    return;
  std::string msg = fmt::format("{} failed: {}", call, describe(result));
  if (!context.empty())
    msg += fmt::format(" while {}", context);
  throw Error(msg);
}

Driver& driver() {
  const DriverLoad& load = driver_load();
  if (!load.driver)
    throw NoGpuError(load.error);
  return *load.driver;
}

bool driver_available(std::string* why) {
  try {
    const DriverLoad& load = driver_load();
    if (!load.driver && why)
      *why = load.error;
    return load.driver != nullptr;
  } catch (const std::exception& e) {  // allocation failure while loading; still never throw from here
    if (why)
      *why = e.what();
    return false;
  }
}

} // namespace kiln::rt
