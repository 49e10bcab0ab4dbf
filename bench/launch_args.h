// Turning the interpreter's argument list (kernels/ helpers such as fa2_interp_args fix the order the
// kernels take) into launch arguments: host buffers become the device buffers that mirror them, scalars
// take the kind the kernel's parameter has.
#pragma once

#include "dsl/interpreter.h"
#include "jit/jit_kernel.h"

#include <llvm/ADT/ArrayRef.h>

#include <utility>
#include <vector>

namespace kiln::bench {

using DeviceMirrors = std::vector<std::pair<const HostBuffer*, const rt::DeviceBuffer*>>;

// A kiln::Error naming the argument when a host buffer has no mirror.
std::vector<LaunchArg> to_launch_args(const JitKernel& kernel, llvm::ArrayRef<InterpArg> args,
                                      const DeviceMirrors& mirrors);
// The same from the kernel's IR, before anything is compiled (the autotuner's inputs).
std::vector<LaunchArg> to_launch_args(const Kernel& kernel, llvm::ArrayRef<InterpArg> args,
                                      const DeviceMirrors& mirrors);

} // namespace kiln::bench
