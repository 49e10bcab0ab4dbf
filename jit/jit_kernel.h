// Running a DSL kernel on the GPU: build its IR for a config, generate CUDA for the current device,
// compile through the cache, load, and launch with arguments checked against the kernel's parameters.
#pragma once

#include "codegen/codegen.h"
#include "dsl/interpreter.h"
#include "dsl/registry.h"
#include "jit/launch_arg.h"
#include "runtime/compiler.h"
#include "runtime/device.h"
#include "runtime/module.h"

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <variant>
#include <vector>

namespace kiln {

// A kernel compiled for one config on the current device.
class JitKernel {
public:
  // Builds, generates and compiles (through the compile cache). `arch` empty: the current device's.
  static std::shared_ptr<JitKernel> compile(const Kernel& k, const std::string& arch = {},
                                            const CodegenOptions& options = {});
  // A kernel from code generated and compiled elsewhere (the autotuner's compile threads): loads it into the
  // current device's context. `generated` and `compiled` must come from `k`.
  static std::shared_ptr<JitKernel> from_compiled(const Kernel& k, GeneratedKernel generated,
                                                  rt::CompiledKernel compiled);

  // Launches over `grid`; the arguments follow the kernel's parameters (count, pointer vs scalar,
  // integer vs float and range are checked, each mismatch an Error naming the parameter).
  void launch(const Grid& grid, const std::vector<LaunchArg>& args, const rt::Stream& stream = rt::Stream()) const;

  const std::string& name() const { return generated_.name; }
  const GeneratedKernel& generated() const { return generated_; }
  const rt::CompiledKernel& compiled() const { return compiled_; }
  const std::vector<Param>& params() const { return params_; }
  const std::vector<Type>& param_types() const { return param_types_; }

private:
  static std::shared_ptr<JitKernel> load(GeneratedKernel generated, rt::CompiledKernel compiled,
                                         std::vector<Param> params, std::vector<Type> param_types);
  // What a launch whose tensor maps are illegal runs (GeneratedKernel::illegal_maps_fallback), compiled and
  // loaded when a launch first needs it.
  const JitKernel& illegal_maps_kernel() const;

  std::vector<Param> params_;
  std::vector<Type> param_types_;
  GeneratedKernel generated_;
  rt::CompiledKernel compiled_;
  std::shared_ptr<rt::LoadedKernel> loaded_;
  int64_t persistent_wave_ = 0; // a persistent grid's CTAs (per SM x the device's SMs), fixed at load; 0: none
  // A dynamic persistent grid's counters (kiln::draw_program), kProgramCounters ints that start at 0 and that each
  // launch leaves at 0; launch k takes counter k % kProgramCounters, so that launches on different streams that
  // run at once draw from different counters (a launch would share one only with the launch kProgramCounters
  // launches of this kernel later, while still running: a persistent grid fills the device, so the next one's
  // CTAs start only as its own finish).
  static constexpr uint32_t kProgramCounters = 1024;
  std::optional<rt::DeviceBuffer> program_counters_;
  mutable std::atomic<uint32_t> launches_{0};
  mutable std::mutex fallback_mutex_;
  mutable std::shared_ptr<const JitKernel> fallback_; // illegal_maps_kernel(), once compiled
};

// The argument check launch() makes (count, pointer vs scalar, integer vs float, range; each mismatch an
// Error naming the parameter), without a GPU.
void check_launch_args(const Kernel& k, const std::vector<LaunchArg>& args);

// Runs a kernel on the GPU with the interpreter's argument list: host buffers are copied to the
// device, the kernel runs, and every buffer is copied back. This is how GPU tests hold generated
// code to the interpreter's semantics on identical inputs.
void run_on_gpu(const JitKernel& kernel, const Grid& grid, llvm::ArrayRef<InterpArg> args);

} // namespace kiln
