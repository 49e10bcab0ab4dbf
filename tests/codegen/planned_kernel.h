// A shipped kernel built at a config and run through the lowering passes, for tests that check the plan
// (codegen/lowering_plan.h) as data rather than the generated text.
#pragma once

#include "codegen/codegen.h"
#include "codegen/lowering_plan.h"
#include "kernels/builtin.h"

#include <map>
#include <string>
#include <vector>

namespace kiln_test {

using namespace kiln;

struct Planned {
  Kernel kernel;
  LoweringPlan plan;
};

// Every pass generate_cuda runs before emission, in its order, over `kernel` (plan_lowering).
inline Planned plan_kernel(Kernel kernel, const std::string& arch, const CodegenOptions& options = {}) {
  Planned p{std::move(kernel), {}};
  p.plan = plan_lowering(p.kernel, Target::parse(arch), options);
  return p;
}

// A shipped kernel at its default config with `overrides`, planned as above.
inline Planned plan_for(const std::string& name, const std::map<std::string, int64_t>& overrides,
                        const std::string& arch, const CodegenOptions& options = {}) {
  const KernelDef& def = builtin_kernels().find(name);
  return plan_kernel(def.build(def.with_overrides(def.default_config(), overrides)), arch, options);
}

// The index of `k`'s parameter `name` (a TensorMapParam's base_param), -1 where it has none.
inline int param_index(const Kernel& k, const std::string& name) {
  for (size_t i = 0; i < k.params.size(); ++i)
    if (k.params[i].name == name)
      return static_cast<int>(i);
  return -1;
}

// The ops of `kind` in program order.
inline std::vector<const Op*> ops_of(const Kernel& k, OpKind kind) {
  std::vector<const Op*> out;
  walk(k.body, [&](const Op& op) {
    if (op.kind == kind)
      out.push_back(&op);
  });
  return out;
}

} // namespace kiln_test
