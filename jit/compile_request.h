// The NVRTC request a generated DSL kernel is compiled with: the one place that says what a kernel's CUDA is
// compiled with (its source, entry function and arch; kiln's NVRTC options come from rt::nvrtc_options, plus
// generated_kernel_options below), for the JIT, the autotuner's compile threads and the offline compile alike,
// so that all three produce the same cubin for the same kernel and arch.
#pragma once

#include "codegen/codegen.h"
#include "runtime/compiler.h"

#include <string>
#include <vector>

namespace kiln {

// Loads NVRTC (its version decides generated_kernel_options) where it is available; where it is not, the
// request carries no extra option and its compile fails with rt::nvrtc()'s "NVRTC not found" error.
rt::CompileRequest compile_request(const GeneratedKernel& generated, const std::string& arch);

// The NVRTC options a generated kernel gets beyond rt::nvrtc_options', for NVRTC major.minor:
// -minimal from NVRTC 12.4 on (older ones reject it). It leaves out the declarations of texture and surface
// functions, the cudadevrt runtime functions, device-side launch and the CUDA runtime/driver types, none of
// which a generated kernel or the prelude uses (they include no CUDA header either), and shortens NVRTC's
// front end by about a quarter; the PTX and cubin are byte for byte those without it (docs/worklog.md §29).
std::vector<std::string> generated_kernel_options(int nvrtc_major, int nvrtc_minor);

} // namespace kiln
