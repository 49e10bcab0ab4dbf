// A shipped kernel built at a config and run through the lowering passes, for tests that check the plan
// (codegen/lowering_plan.h) as data rather than the generated text.
#pragma once

#include "codegen/analyze_contiguity.h"
#include "codegen/assign_layouts.h"
#include "codegen/plan_bulk_reductions.h"
#include "codegen/choose_dot_lowering.h"
#include "codegen/plan_late_products.h"
#include "codegen/plan_tile_barriers.h"
#include "codegen/plan_layout_conversions.h"
#include "codegen/plan_persistent_grid.h"
#include "codegen/plan_prefetch_buffers.h"
#include "codegen/plan_pingpong.h"
#include "codegen/plan_products_ahead.h"
#include "codegen/plan_exp2_on_fma.h"
#include "codegen/plan_register_operands.h"
#include "codegen/plan_warp_uniform_scalars.h"
#include "codegen/plan_rescale_skips.h"
#include "codegen/plan_scratch.h"
#include "codegen/plan_tma_copies.h"
#include "codegen/plan_tma_stores.h"
#include "codegen/plan_unordered_reductions.h"
#include "codegen/plan_warp_specialization.h"
#include "codegen/schedule_async_copies.h"
#include "codegen/schedule_products.h"
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

// Every pass generate_cuda runs before emission, in its order, over `kernel`.
inline Planned plan_kernel(Kernel kernel, const std::string& arch, const CodegenOptions& options = {}) {
  Planned p{std::move(kernel), {}};
  const Target t = Target::parse(arch);
  p.plan = assign_layouts(p.kernel, t, options);
  plan_shared_memory(p.plan);
  choose_dot_lowering(p.kernel, t, options, p.plan);
  schedule_async_copies(p.kernel, t, options, p.plan);
  plan_tma_copies(p.kernel, t, options, p.plan);
  plan_warp_specialization(p.kernel, t, options, p.plan);
  plan_pingpong(p.kernel, options, p.plan);
  plan_products_ahead(p.kernel, options, p.plan);
  plan_late_products(p.kernel, options, p.plan);
  plan_tile_barriers(p.kernel, options, p.plan);
  plan_persistent_grid(p.kernel, options, p.plan);
  analyze_contiguity(p.kernel, t, options, p.plan);
  plan_layout_conversions(p.kernel, p.plan);
  plan_scratch(p.kernel, p.plan);
  schedule_products(p.kernel, options, p.plan);
  plan_bulk_reductions(p.kernel, t, options, p.plan);
  plan_prefetch_buffers(p.kernel, t, options, p.plan);
  plan_tma_stores(p.kernel, t, options, p.plan);
  plan_unordered_reductions(p.kernel, p.plan);
  plan_rescale_skips(p.kernel, p.plan);
  plan_exp2_on_fma(p.kernel, p.plan);
  plan_register_operands(p.kernel, t, options, p.plan);
  plan_warp_uniform_scalars(p.kernel, options, p.plan);
  return p;
}

// A shipped kernel at its default config with `overrides`, planned as above.
inline Planned plan_for(const std::string& name, const std::map<std::string, int64_t>& overrides,
                        const std::string& arch, const CodegenOptions& options = {}) {
  const KernelDef& def = builtin_kernels().find(name);
  return plan_kernel(def.build(def.with_overrides(def.default_config(), overrides)), arch, options);
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
