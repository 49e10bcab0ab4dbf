// Finding and loading libnvrtc with dlopen.
#include "runtime/nvrtc.h"

#include "support/error.h"

#include <dlfcn.h>

#include <cstdlib>
#include <memory>
#include <vector>

namespace kiln::rt {

namespace {

struct NvrtcLoad {
  std::unique_ptr<Nvrtc> nvrtc;
  std::string error;
};

template <typename Fn>
void resolve(void* lib, const char* symbol, Fn& slot, std::vector<std::string>& missing) {
  void* address = dlsym(lib, symbol);
  if (!address)
    missing.push_back(symbol);
  slot = reinterpret_cast<Fn>(address);
}

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
  void* lib = nullptr;
  std::string library, errors;
  for (const std::string& candidate : nvrtc_candidates()) {
    lib = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (lib) {
      library = candidate;
      break;
    }
    const char* e = dlerror();
    errors += fmt::format("\n  {}: {}", candidate, e ? e : "dlopen failed");
  }
  if (!lib) {
    out.error = fmt::format("NVRTC not found: set CUDA_HOME to a CUDA 12 or 13 toolkit, or put libnvrtc on "
                            "LD_LIBRARY_PATH; searched:{}",
                            errors);
    return out;
  }
  auto n = std::make_unique<Nvrtc>();
  n->library = library;
  std::vector<std::string> missing;
  resolve(lib, "nvrtcVersion", n->nvrtcVersion, missing);
  resolve(lib, "nvrtcGetErrorString", n->nvrtcGetErrorString, missing);
  resolve(lib, "nvrtcCreateProgram", n->nvrtcCreateProgram, missing);
  resolve(lib, "nvrtcDestroyProgram", n->nvrtcDestroyProgram, missing);
  resolve(lib, "nvrtcCompileProgram", n->nvrtcCompileProgram, missing);
  resolve(lib, "nvrtcGetProgramLogSize", n->nvrtcGetProgramLogSize, missing);
  resolve(lib, "nvrtcGetProgramLog", n->nvrtcGetProgramLog, missing);
  resolve(lib, "nvrtcGetCUBINSize", n->nvrtcGetCUBINSize, missing);
  resolve(lib, "nvrtcGetCUBIN", n->nvrtcGetCUBIN, missing);
  resolve(lib, "nvrtcGetPTXSize", n->nvrtcGetPTXSize, missing);
  resolve(lib, "nvrtcGetPTX", n->nvrtcGetPTX, missing);
  resolve(lib, "nvrtcAddNameExpression", n->nvrtcAddNameExpression, missing);
  resolve(lib, "nvrtcGetLoweredName", n->nvrtcGetLoweredName, missing);
  if (!missing.empty()) {
    std::string list;
    for (const auto& m : missing)
      list += (list.empty() ? "" : ", ") + m;
    out.error = fmt::format("NVRTC at {} lacks functions kiln needs ({}); kiln needs NVRTC 12 or newer", library,
                            list);
    return out;
  }
  if (nvrtcResult r = n->nvrtcVersion(&n->major, &n->minor); r != nvrtc_codes::kSuccess) {
    out.error = fmt::format("NVRTC at {} was found but nvrtcVersion failed: {}", library,
                            n->nvrtcGetErrorString(r));
    return out;
  }
  out.nvrtc = std::move(n);
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
  if (!load.nvrtc)
    throw Error(load.error);
  return *load.nvrtc;
}

bool nvrtc_available(std::string* why) {
  try {
    const NvrtcLoad& load = nvrtc_load();
    if (!load.nvrtc && why)
      *why = load.error;
    return load.nvrtc != nullptr;
  } catch (const std::exception& e) {
    if (why)
      *why = e.what();
    return false;
  }
}

} // namespace kiln::rt
