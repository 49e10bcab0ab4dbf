// Loading libcuda with dlopen and checking driver results.
#include "runtime/cuda_driver.h"

#include "runtime/shared_library.h"
#include "support/error.h"

#include <memory>

namespace kiln::rt {

namespace {

// The outcome of the one attempt to load the driver: either a driver or the reason there is none.
using DriverLoad = LibraryLoad<Driver>;

DriverLoad load_driver() {
  DriverLoad out;
  const OpenedLibrary lib = open_first({"libcuda.so.1", "libcuda.so"});
  if (!lib.handle) {
    std::string errors;
    for (const OpenedLibrary::Failure& f : lib.failures)
      errors += fmt::format("{}{}", errors.empty() ? "" : "; ", f.reason.empty() ? f.candidate : f.reason);
    out.error = fmt::format("no CUDA driver found: {} (searched libcuda.so.1 and libcuda.so on the loader path: "
                            "LD_LIBRARY_PATH and the ld.so cache; kiln can still compile with NVRTC and "
                            "interpret kernels on the CPU)",
                            errors);
    return out;
  }

  const std::string& library = lib.path;
  auto d = std::make_unique<Driver>();
  d->library = library;
  SymbolResolver resolve(lib.handle);
  resolve.required("cuInit", d->cuInit);
  resolve.required("cuDriverGetVersion", d->cuDriverGetVersion);
  resolve.required("cuGetErrorName", d->cuGetErrorName);
  resolve.required("cuGetErrorString", d->cuGetErrorString);
  resolve.required("cuDeviceGet", d->cuDeviceGet);
  resolve.required("cuDeviceGetCount", d->cuDeviceGetCount);
  resolve.required("cuDeviceGetName", d->cuDeviceGetName);
  resolve.required("cuDeviceGetAttribute", d->cuDeviceGetAttribute);
  resolve.required("cuDeviceTotalMem_v2", d->cuDeviceTotalMem);
  resolve.required("cuDevicePrimaryCtxRetain", d->cuDevicePrimaryCtxRetain);
  resolve.required("cuDevicePrimaryCtxRelease_v2", d->cuDevicePrimaryCtxRelease);
  resolve.required("cuCtxSetCurrent", d->cuCtxSetCurrent);
  resolve.required("cuCtxGetCurrent", d->cuCtxGetCurrent);
  resolve.required("cuCtxSynchronize", d->cuCtxSynchronize);
  resolve.required("cuModuleLoadData", d->cuModuleLoadData);
  resolve.required("cuModuleLoadDataEx", d->cuModuleLoadDataEx);
  resolve.required("cuModuleUnload", d->cuModuleUnload);
  resolve.required("cuModuleGetFunction", d->cuModuleGetFunction);
  resolve.required("cuFuncSetAttribute", d->cuFuncSetAttribute);
  resolve.required("cuFuncGetAttribute", d->cuFuncGetAttribute);
  resolve.required("cuLaunchKernel", d->cuLaunchKernel);
  resolve.required("cuMemAlloc_v2", d->cuMemAlloc);
  resolve.required("cuMemFree_v2", d->cuMemFree);
  resolve.required("cuMemcpyHtoD_v2", d->cuMemcpyHtoD);
  resolve.required("cuMemcpyDtoH_v2", d->cuMemcpyDtoH);
  resolve.required("cuMemcpyDtoD_v2", d->cuMemcpyDtoD);
  resolve.required("cuMemsetD8_v2", d->cuMemsetD8);
  resolve.required("cuMemsetD8Async", d->cuMemsetD8Async);
  resolve.required("cuMemGetInfo_v2", d->cuMemGetInfo);
  resolve.required("cuStreamCreate", d->cuStreamCreate);
  resolve.required("cuStreamDestroy_v2", d->cuStreamDestroy);
  resolve.required("cuStreamSynchronize", d->cuStreamSynchronize);
  resolve.required("cuEventCreate", d->cuEventCreate);
  resolve.required("cuEventRecord", d->cuEventRecord);
  resolve.required("cuEventSynchronize", d->cuEventSynchronize);
  resolve.required("cuEventElapsedTime", d->cuEventElapsedTime);
  resolve.required("cuEventDestroy_v2", d->cuEventDestroy);
  resolve.optional("cuTensorMapEncodeTiled", d->cuTensorMapEncodeTiled);
  if (!resolve.complete()) {
    out.error = fmt::format("the CUDA driver {} lacks the functions kiln needs ({}); the driver is too old "
                            "for kiln, which needs CUDA 12 or newer",
                            library, resolve.missing());
    return out;  // the library stays open; unloading a half-used driver buys nothing
  }

  if (CUresult r = d->cuDriverGetVersion(&d->version); r != cu::kSuccess)
    d->version = 0;
  if (CUresult r = d->cuInit(0); r != cu::kSuccess) {
    out.error = fmt::format("a CUDA driver was found ({}, version {}) but cuInit failed: {}", library,
                            d->version, d->describe(r));
    return out;
  }
  out.api = std::move(d);
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
  if (!load.api)
    throw NoGpuError(load.error);
  return *load.api;
}

bool driver_available(std::string* why) { return available(&driver_load, why); }

} // namespace kiln::rt
