// Finding and loading libnvrtc with dlopen.
#include "runtime/nvrtc.h"

#include "runtime/shared_library.h"
#include "support/error.h"

#include <cstdlib>
#include <vector>

namespace kiln::rt {

namespace {

using NvrtcLoad = LibraryLoad<Nvrtc>;

// In search order: an explicit CUDA_HOME wins over whatever the loader would find.
std::vector<std::string> nvrtc_candidates() {
  const char* names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
  std::vector<std::string> out;
  if (const char* home = std::getenv("CUDA_HOME"); home && *home) {
    for (const char* sub : {"lib64", "lib"})
      for (const char* name : names)
        out.push_back(fmt::format("{}/{}/{}", home, sub, name));
  }
  for (const char* name : names)
    out.push_back(name);  // no slash: dlopen searches LD_LIBRARY_PATH and the ld.so cache
  for (const char* name : names)
    out.push_back(fmt::format("/usr/local/cuda/lib64/{}", name));
  return out;
}

NvrtcLoad load_nvrtc() {
  NvrtcLoad out;
  const OpenedLibrary lib = open_first(nvrtc_candidates());
  if (!lib.handle) {
    std::string searched;
    for (const OpenedLibrary::Failure& f : lib.failures)
      searched += fmt::format("\n  {}: {}", f.candidate, f.reason.empty() ? "dlopen failed" : f.reason);
    out.error = fmt::format("NVRTC not found: set CUDA_HOME to a CUDA 12 or 13 toolkit, or put libnvrtc on "
                            "LD_LIBRARY_PATH; searched:{}",
                            searched);
    return out;
  }
  const std::string& library = lib.path;
  auto n = std::make_unique<Nvrtc>();
  n->library = library;
  SymbolResolver resolve(lib.handle);
  resolve.required("nvrtcVersion", n->nvrtcVersion);
  resolve.required("nvrtcGetErrorString", n->nvrtcGetErrorString);
  resolve.required("nvrtcCreateProgram", n->nvrtcCreateProgram);
  resolve.required("nvrtcDestroyProgram", n->nvrtcDestroyProgram);
  resolve.required("nvrtcCompileProgram", n->nvrtcCompileProgram);
  resolve.required("nvrtcGetProgramLogSize", n->nvrtcGetProgramLogSize);
  resolve.required("nvrtcGetProgramLog", n->nvrtcGetProgramLog);
  resolve.required("nvrtcGetCUBINSize", n->nvrtcGetCUBINSize);
  resolve.required("nvrtcGetCUBIN", n->nvrtcGetCUBIN);
  resolve.required("nvrtcGetPTXSize", n->nvrtcGetPTXSize);
  resolve.required("nvrtcGetPTX", n->nvrtcGetPTX);
  resolve.required("nvrtcAddNameExpression", n->nvrtcAddNameExpression);
  resolve.required("nvrtcGetLoweredName", n->nvrtcGetLoweredName);
  if (!resolve.complete()) {
    out.error = fmt::format("NVRTC at {} lacks functions kiln needs ({}); kiln needs NVRTC 12 or newer", library,
                            resolve.missing());
    return out;
  }
  if (nvrtcResult r = n->nvrtcVersion(&n->major, &n->minor); r != nvrtc_codes::kSuccess) {
    out.error = fmt::format("NVRTC at {} was found but nvrtcVersion failed: {}", library,
                            n->nvrtcGetErrorString(r));
    return out;
  }
  out.api = std::move(n);
  return out;
}

const NvrtcLoad& nvrtc_load() {
  static const NvrtcLoad load = load_nvrtc();
  return load;
}

} // namespace

std::string Nvrtc::version_string() const { return fmt::format("{}.{}", major, minor); }

void Nvrtc::check(nvrtcResult result, std::string_view call, std::string_view context) const {
  if (result == nvrtc_codes::kSuccess)
    return;
  const char* text = nvrtcGetErrorString ? nvrtcGetErrorString(result) : nullptr;
  std::string msg = fmt::format("{} failed: {} (code {})", call, text ? text : "unknown NVRTC error", result);
  if (!context.empty())
    msg += fmt::format(" while {}", context);
  throw Error(msg);
}

Nvrtc& nvrtc() {
  const NvrtcLoad& load = nvrtc_load();
  if (!load.api)
    throw Error(load.error);
  return *load.api;
}

bool nvrtc_available(std::string* why) { return available(&nvrtc_load, why); }

} // namespace kiln::rt
