// The NVRTC request a generated DSL kernel is compiled with: the one place that says what a kernel's CUDA is
// compiled with (its source, entry function and arch; kiln's NVRTC options come from rt::nvrtc_options), for
// the JIT, the autotuner's compile threads and the offline compile alike, so that all three produce the same
// cubin for the same kernel and arch.
#pragma once

#include "codegen/codegen.h"
#include "runtime/compiler.h"

#include <string>

namespace kiln {

rt::CompileRequest compile_request(const GeneratedKernel& generated, const std::string& arch);

} // namespace kiln
