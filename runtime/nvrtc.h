// NVRTC, the CUDA runtime compiler, opened with dlopen on first use. Owns the search for libnvrtc
// ($CUDA_HOME, the loader path, /usr/local/cuda), its function table and result checking.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace kiln::rt {

using nvrtcResult = int;
using nvrtcProgram = struct _nvrtcProgram*;

namespace nvrtc_codes {
constexpr nvrtcResult kSuccess = 0;
constexpr nvrtcResult kCompilationFailed = 6;  // NVRTC_ERROR_COMPILATION
} // namespace nvrtc_codes

struct Nvrtc {
  std::string library;  // the path or name dlopen accepted
  int major = 0, minor = 0;

  nvrtcResult (*nvrtcVersion)(int* major, int* minor) = nullptr;
  const char* (*nvrtcGetErrorString)(nvrtcResult result) = nullptr;
  nvrtcResult (*nvrtcCreateProgram)(nvrtcProgram* prog, const char* source, const char* name, int num_headers,
                                    const char* const* headers, const char* const* include_names) = nullptr;
  nvrtcResult (*nvrtcDestroyProgram)(nvrtcProgram* prog) = nullptr;
  nvrtcResult (*nvrtcCompileProgram)(nvrtcProgram prog, int num_options, const char* const* options) = nullptr;
  nvrtcResult (*nvrtcGetProgramLogSize)(nvrtcProgram prog, size_t* size) = nullptr;
  nvrtcResult (*nvrtcGetProgramLog)(nvrtcProgram prog, char* log) = nullptr;
  nvrtcResult (*nvrtcGetCUBINSize)(nvrtcProgram prog, size_t* size) = nullptr;
  nvrtcResult (*nvrtcGetCUBIN)(nvrtcProgram prog, char* cubin) = nullptr;
  nvrtcResult (*nvrtcGetPTXSize)(nvrtcProgram prog, size_t* size) = nullptr;
  nvrtcResult (*nvrtcGetPTX)(nvrtcProgram prog, char* ptx) = nullptr;
  nvrtcResult (*nvrtcAddNameExpression)(nvrtcProgram prog, const char* name_expression) = nullptr;
  nvrtcResult (*nvrtcGetLoweredName)(nvrtcProgram prog, const char* name_expression,
                                     const char** lowered_name) = nullptr;

  std::string version_string() const;  // "13.0"
  // Throws kiln::Error "<call> failed: <NVRTC text>[ while <context>]" unless result is success.
  void check(nvrtcResult result, std::string_view call, std::string_view context = {}) const;
};

// The process-wide NVRTC, loaded on first use (thread-safe). Throws kiln::Error starting "NVRTC not found: "
// with every place searched and why each failed.
Nvrtc& nvrtc();

// True when nvrtc() would succeed; otherwise false with the reason in *why. Never throws.
bool nvrtc_available(std::string* why = nullptr);

} // namespace kiln::rt
