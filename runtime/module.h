// Loaded kernels: a cubin loaded as a module into the current device's context (one module per context and
// cache key, kept for the process), its function handle, and launches with clear errors.
#pragma once

#include "runtime/compiler.h"
#include "runtime/device.h"

#include <atomic>
#include <memory>
#include <string>

namespace kiln::rt {

struct Dim3 {
  unsigned x = 1, y = 1, z = 1;
  uint64_t count() const { return uint64_t{x} * y * z; }
};

class LoadedKernel {
public:
  // The kernel of `kernel` loaded into current_device()'s context; loading the same cache key (or, without
  // one, the same cubin and name) again returns the same object.
  static std::shared_ptr<LoadedKernel> load(const CompiledKernel& kernel);

  ~LoadedKernel();
  LoadedKernel(const LoadedKernel&) = delete;
  LoadedKernel& operator=(const LoadedKernel&) = delete;

  // args: one pointer per kernel parameter, pointing at its value (as cuLaunchKernel takes them).
  // dynamic_smem beyond 48 KiB less the kernel's static smem opts in first (and must fit the device's opt-in
  // limit less static smem).
  void launch(Dim3 grid, Dim3 block, size_t dynamic_smem, void** args, const Stream& stream = Stream()) const;

  // Registers, static smem, local and constant bytes and the max block size, as the driver reports them.
  ResourceUsage function_usage() const;

  const std::string& name() const { return name_; }
  const std::string& arch() const { return arch_; }
  CUfunction function() const { return function_; }

  struct Private;  // keeps the constructor to load()
  LoadedKernel(const Private&, const CompiledKernel& kernel);

private:
  std::string describe_launch(Dim3 grid, Dim3 block, size_t dynamic_smem) const;

  std::string name_;
  std::string arch_;
  int ordinal_ = 0;
  CUmodule module_ = nullptr;
  CUfunction function_ = nullptr;
  // The dynamic shared memory the function may take now: 48 KiB less its static shared memory until it opts in.
  mutable std::atomic<int64_t> dynamic_smem_limit_{48 * 1024};
  mutable std::atomic<bool> carveout_set_{false};                // the shared-memory carveout preference
};

} // namespace kiln::rt
