#include "dsl/registry.h"

#include <fmt/ranges.h>

#include <algorithm>

namespace kiln {

Config KernelDef::default_config() const {
  Config c;
  for (const ParamDef& p : params)
    c.params[p.name] = p.default_value;
  c.num_warps = default_num_warps;
  c.num_stages = default_num_stages;
  return c;
}

namespace {

const ParamDef kNumWarps = ParamDef::power_of_two("num_warps", 4, "warps a program", 1, 32);
const ParamDef kNumStages = ParamDef::count("num_stages", 2, "depth of pipelined loads", 1, 8);

const ParamDef* find_param(const std::vector<ParamDef>& params, const std::string& name) {
  for (const ParamDef& p : params)
    if (p.name == name)
      return &p;
  return nullptr;
}

void check_value(const std::string& kernel, const ParamDef& p, int64_t v) {
  if (!p.accepts(v))
    fail("kernel '{}': {}={} is not allowed; {} takes {}", kernel, p.name, v, p.name, p.expected());
}

} // namespace

void check_param_values(const std::string& kernel, const std::vector<ParamDef>& params, const Config& config) {
  for (const ParamDef& p : params)
    if (auto it = config.params.find(p.name); it != config.params.end())
      check_value(kernel, p, it->second);
}

void check_grid(const std::string& kernel, const Grid& grid) {
  for (size_t d = 0; d < grid.size(); ++d) {
    const int64_t limit = d == 0 ? kMaxGridX : kMaxGridYZ;
    if (grid[d] < 1 || grid[d] > limit)
      fail("kernel '{}': grid ({}, {}, {}) has {} programs in dim {} ({}); CUDA allows 1 to {} there", kernel,
           grid[0], grid[1], grid[2], grid[d], d, "xyz"[d], limit);
  }
}

Config KernelDef::with_overrides(Config base, const std::map<std::string, int64_t>& overrides) const {
  for (const auto& [k, v] : overrides) {
    if (k == kNumWarps.name) {
      check_value(name, kNumWarps, v);
      base.num_warps = static_cast<int>(v);
    } else if (k == kNumStages.name) {
      check_value(name, kNumStages, v);
      base.num_stages = static_cast<int>(v);
    } else {
      base.params[k] = v;
    }
  }
  check(base);
  return base;
}

void KernelDef::check(const Config& config) const {
  for (const auto& [k, v] : config.params) {
    if (find_param(params, k))
      continue;
    std::string names = "num_warps, num_stages";
    for (const ParamDef& d : params)
      names += ", " + d.name;
    fail("kernel '{}' has no parameter '{}'; its parameters are: {}", name, k, names);
  }
  check_param_values(name, params, config);
  check_value(name, kNumWarps, config.num_warps);
  check_value(name, kNumStages, config.num_stages);
}

void KernelRegistry::add(KernelDef def) {
  // A registry is filled by kiln for its own kernels and by users for theirs (kiln/tool_main.h): a bad
  // definition is the author's mistake, reported before any command uses it.
  if (def.name.empty())
    fail("a kernel definition needs a name (KernelDef::name); got an empty one");
  if (!def.build)
    fail("kernel '{}' has no build function (KernelDef::build); expected one that returns its Kernel for a "
         "Config",
         def.name);
  for (size_t i = 0; i < def.params.size(); ++i) {
    const ParamDef& p = def.params[i];
    if (p.min > p.max || !p.accepts(p.default_value))
      fail("kernel '{}': parameter {} has the default {}, which its declared values do not hold; {} takes {}",
           def.name, p.name, p.default_value, p.name, p.expected());
    if (p.name == kNumWarps.name || p.name == kNumStages.name || find_param(def.params, p.name) != &p)
      fail("kernel '{}' declares the parameter {} twice (num_warps and num_stages are every kernel's); "
           "expected "
           "each name once",
           def.name, p.name);
  }
  for (const std::string& key : def.tuning_key)
    if (std::find(def.size_args.begin(), def.size_args.end(), key) == def.size_args.end())
      fail("kernel '{}': tuning key '{}' is not one of its size arguments ({}); expected a subset of them",
           def.name, key, fmt::format("{}", fmt::join(def.size_args, ", ")));
  for (const auto& [arg, dims] : def.tensor_dims)
    for (const std::string& dim : dims)
      if (std::find(def.size_args.begin(), def.size_args.end(), dim) == def.size_args.end())
        fail("kernel '{}': tensor '{}' has the dim '{}', which is not one of its size arguments ({}); expected "
             "each dim to name one",
             def.name, arg, dim, fmt::format("{}", fmt::join(def.size_args, ", ")));
  if (!(def.reference_tolerance >= 0))
    fail("kernel '{}': reference_tolerance {} is negative; expected a relative L2 error >= 0 (0: the output "
         "dtype's)",
         def.name, def.reference_tolerance);
  for (const KernelDef& d : defs_)
    if (d.name == def.name)
      fail("kernel '{}' is registered twice; expected each name once", def.name);
  defs_.push_back(std::move(def));
}

std::string KernelRegistry::names() const {
  std::string names;
  for (const KernelDef& d : defs_)
    names += (names.empty() ? "" : ", ") + d.name;
  return names;
}

const KernelDef& KernelRegistry::find(const std::string& name) const {
  for (const KernelDef& d : defs_)
    if (d.name == name)
      return d;
  if (defs_.empty())
    fail("no kernel named '{}'; no kernels are registered", name);
  fail("no kernel named '{}'; known kernels: {}", name, names());
}

} // namespace kiln

namespace kiln {

namespace {
template <typename Map> const typename Map::mapped_type& find_named(const Map& m, const std::string& name,
                                                                     const char* what) {
  auto it = m.find(name);
  if (it == m.end()) {
    std::string names;
    for (const auto& [k, v] : m)
      names += (names.empty() ? "" : ", ") + k;
    fail("the reference asks for the {} '{}'; the run has {}", what, name, names.empty() ? "none" : names);
  }
  return it->second;
}
} // namespace

const std::vector<double>& ReferenceInputs::tensor(const std::string& name) const {
  return find_named(tensors, name, "tensor");
}
double ReferenceInputs::scalar(const std::string& name) const { return find_named(scalars, name, "scalar"); }
int64_t ReferenceInputs::size(const std::string& name) const { return find_named(sizes, name, "size"); }

} // namespace kiln
