// The kernel registry: each kernel's name, compile-time parameters with defaults, config space,
// tuning key and launch rule, so that tools can list, emit, tune and run any kernel by name.
#pragma once

#include "dsl/ir.h"

#include <array>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace kiln {

// The integer sizes a launch rule and a tuning key read (sequence lengths, batch, ...), by name.
using SizeArgs = std::map<std::string, int64_t>;
using Grid = std::array<int64_t, 3>;

struct ParamDef {
  std::string name;
  int64_t default_value;
  std::string help;
};

struct KernelDef {
  std::string name;
  std::string summary;
  std::vector<ParamDef> params; // compile-time parameters
  int default_num_warps = 4;
  int default_num_stages = 2;
  std::function<Kernel(const Config&)> build;
  std::function<std::vector<Config>()> config_space; // candidates for the autotuner
  std::function<Grid(const Config&, const SizeArgs&)> grid;
  std::vector<std::string> size_args;  // names the grid and tuning key may read
  std::vector<std::string> tuning_key; // subset of size_args (plus dtypes/flags via params)

  Config default_config() const;
  // `base` with NAME=VALUE overrides applied; an unknown name is an Error listing the parameters.
  Config with_overrides(Config base, const std::map<std::string, int64_t>& overrides) const;
};

class KernelRegistry {
public:
  void add(KernelDef def);
  const KernelDef& find(const std::string& name) const; // Error listing the known kernels when absent
  const std::vector<KernelDef>& all() const { return defs_; }

private:
  std::vector<KernelDef> defs_;
};

} // namespace kiln
