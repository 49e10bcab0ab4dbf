#include "dsl/registry.h"

namespace kiln {

Config KernelDef::default_config() const {
  Config c;
  for (const ParamDef& p : params)
    c.params[p.name] = p.default_value;
  c.num_warps = default_num_warps;
  c.num_stages = default_num_stages;
  return c;
}

Config KernelDef::with_overrides(Config base, const std::map<std::string, int64_t>& overrides) const {
  for (const auto& [k, v] : overrides) {
    if (k == "num_warps") {
      if (v < 1 || v > 32 || (v & (v - 1)) != 0)
        fail("kernel '{}': num_warps must be a power of two from 1 to 32, got {}", name, v);
      base.num_warps = static_cast<int>(v);
      continue;
    }
    if (k == "num_stages") {
      if (v < 1 || v > 8)
        fail("kernel '{}': num_stages must be from 1 to 8, got {}", name, v);
      base.num_stages = static_cast<int>(v);
      continue;
    }
    bool known = false;
    for (const ParamDef& p : params)
      known |= p.name == k;
    if (!known) {
      std::string names = "num_warps, num_stages";
      for (const ParamDef& p : params)
        names += ", " + p.name;
      fail("kernel '{}' has no parameter '{}'; its parameters are: {}", name, k, names);
    }
    base.params[k] = v;
  }
  return base;
}

void KernelRegistry::add(KernelDef def) {
  for (const KernelDef& d : defs_)
    if (d.name == def.name)
      throw InternalError("kernel registered twice: " + def.name);
  defs_.push_back(std::move(def));
}

const KernelDef& KernelRegistry::find(const std::string& name) const {
  for (const KernelDef& d : defs_)
    if (d.name == name)
      return d;
  std::string names;
  for (const KernelDef& d : defs_)
    names += (names.empty() ? "" : ", ") + d.name;
  fail("no kernel named '{}'; known kernels: {}", name, names);
}

} // namespace kiln
