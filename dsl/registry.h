// The kernel registry: each kernel's name, compile-time parameters with defaults, config space,
// tuning key and launch rule, so that tools can list, emit, tune and run any kernel by name.
#pragma once

#include "dsl/ir.h"
#include "dsl/kernel_reference.h"
#include "dsl/param_def.h"

#include <array>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace kiln {

using Grid = std::array<int64_t, 3>;

// The least power of two >= v (1 for v <= 1): the usual bucket for sequence lengths.
inline int64_t next_pow2(int64_t v) {
  int64_t p = 1;
  while (p < v)
    p *= 2;
  return p;
}

// Each parameter of `params` that `config` sets within its declared kind and range, else a kiln::Error naming
// `kernel`, the parameter, what it takes and the value given (KernelDef::check runs it over every parameter).
void check_param_values(const std::string& kernel, const std::vector<ParamDef>& params, const Config& config);

// CUDA's limits on a launch grid: x from 1 to 2^31 - 1, y and z from 1 to 65535.
inline constexpr int64_t kMaxGridX = 2147483647, kMaxGridYZ = 65535;
// A kiln::Error naming `kernel`, the dim, its limit and `grid` when a dim is outside CUDA's limits.
void check_grid(const std::string& kernel, const Grid& grid);

struct KernelDef {
  std::string name;
  std::string summary;
  std::vector<ParamDef> params; // compile-time parameters, each with the values it takes
  int default_num_warps = 4;
  int default_num_stages = 2;
  std::function<Kernel(const Config&)> build;
  // Candidates for the autotuner. The params they give different values, or all one value other than the
  // default, are the tuned ones (jit/tuned_kernel.h: tuned_params); the rest come from the problem.
  std::function<std::vector<Config>()> config_space;
  std::function<Grid(const Config&, const SizeArgs&)> grid;
  std::vector<std::string> size_args;  // names the grid and tuning key may read
  std::vector<std::string> tuning_key; // subset of size_args (plus dtypes/flags via params)
  // The bucket a tuning-key size falls in (e.g. next_pow2 of a sequence length), so that nearby sizes share
  // one tuning result; empty: sizes are keyed exactly.
  std::function<int64_t(const std::string& size_name, int64_t value)> bucket;
  // Why the autotuner should not try `config` for these sizes (e.g. a tile larger than the problem needs),
  // or "" to try it; empty: every config is tried. Must be thread-safe.
  std::function<std::string(const Config&, const SizeArgs&)> prune;
  // Optional, for `run` (dsl/kernel_reference.h): the shape of each buffer argument in size arguments (a buffer
  // left out is a flat array of what the launch plan says the kernel reaches); a double-precision reference
  // for `run --check`, and the relative L2 error it allows (0: kiln::tolerance of each output's dtype).
  std::map<std::string, TensorDims> tensor_dims;
  KernelReferenceFn reference;
  double reference_tolerance = 0;

  Config default_config() const;
  // `base` with NAME=VALUE overrides applied, then check()ed; an unknown name is an Error listing the parameters.
  Config with_overrides(Config base, const std::map<std::string, int64_t>& overrides) const;
  // Every parameter of `config` known and within its declared kind and range, num_warps a power of two from 1
  // to 32 and num_stages from 1 to 8; else a kiln::Error naming the kernel, the parameter, what it takes and
  // the value given. Every entry point (commands, host APIs, the tuner) runs it before building or launching.
  void check(const Config& config) const;
};

// The kernels a program knows by name: kiln's own (kernels/builtin.h) or a user's, which the command line
// takes as an argument (kiln/tool_main.h). A plain value, not a process-wide singleton: copy kiln's and add
// to it, or start empty.
class KernelRegistry {
public:
  // Adds `def`; a kiln::Error when it has no name or no build function, a parameter declared twice or whose
  // default its declared values do not hold, a tuning key or a tensor dim that is not a size argument, a
  // negative reference tolerance, or a name already registered.
  void add(KernelDef def);
  const KernelDef& find(const std::string& name) const; // Error listing the known kernels when absent
  const std::vector<KernelDef>& all() const { return defs_; }
  std::string names() const; // "a, b, c", in the order added

private:
  std::vector<KernelDef> defs_;
};

} // namespace kiln
