// Compiling a DSL kernel ahead of time, for any arch kiln targets, with NVRTC alone: no CUDA driver and no
// GPU are needed, only libnvrtc (found as runtime/nvrtc.h says: $CUDA_HOME, the loader path,
// /usr/local/cuda). What `kiln emit --stage ptx|sass` prints, as a library call:
//
//   Kernel k = layernorm_def().build(config);         // any kernel, any config
//   KernelArtifacts a = compile_offline(k, "sm_90a"); // any arch: sm_80 sm_86 sm_89 sm_90 sm_90a
//   a.compiled.ptx, a.compiled.cubin                  // PTX text, the cubin (an ELF image)
//   a.compiled.usage.registers                        // ptxas -v: registers per thread, spills, ...
//   a.generated.threads, a.generated.shared_bytes     // what a launch of it needs
//
// The cubin is the one JitKernel::compile would load for the same kernel and arch (same source, same NVRTC
// options: jit/compile_request.h); it is compiled now, not read from the compile cache, and not dumped.
#pragma once

#include "codegen/codegen.h"
#include "runtime/compiler.h"

#include <string>

namespace kiln {

struct KernelArtifacts {
  // The CUDA C++ (source), the entry function's name, the summary of the lowering decisions (lowered), and
  // what a launch needs: threads per CTA and dynamic shared memory per CTA (shared_bytes).
  GeneratedKernel generated;
  // What NVRTC made of it for the arch: cubin, ptx (for the arch's virtual arch, e.g. compute_90a), log
  // (NVRTC's, ptxas -v included), lowered_name (the entry's symbol in the cubin) and usage: registers per
  // thread, static shared memory, stack frame, spill store and load bytes, constant bytes (-1: not reported).
  rt::CompiledKernel compiled;

  // One line: "<kernel> on <arch>: registers 38 per thread, static shared 0 bytes, dynamic shared 0 bytes,
  // stack 0 bytes, spill stores 0 bytes, spill loads 0 bytes" ("n/a" for a figure ptxas did not report).
  std::string usage_summary() const;
};

// Generates CUDA for `arch` and compiles it with NVRTC to PTX and a cubin, reading ptxas's resource usage.
// Throws kiln::Error for an arch kiln does not target (naming the ones it does), a config the arch cannot run
// (TargetLimitError: shared memory beyond the arch's limit, ...), a missing NVRTC (naming every place
// searched), or a compile error (the NVRTC log, offending lines quoted). Never touches the CUDA driver.
[[nodiscard]] KernelArtifacts compile_offline(const Kernel& k, const std::string& arch,
                                              const CodegenOptions& options = {});

} // namespace kiln
