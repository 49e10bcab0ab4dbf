// The lowering script: one readable sequence of passes, each logged when KILN_LOG=passes.
#include "codegen/codegen.h"

#include "codegen/analyze_contiguity.h"
#include "codegen/assign_layouts.h"
#include "codegen/choose_dot_lowering.h"
#include "codegen/describe_plan.h"
#include "codegen/emit_cuda.h"
#include "codegen/plan_bulk_reductions.h"
#include "codegen/plan_layout_conversions.h"
#include "codegen/plan_persistent_grid.h"
#include "codegen/plan_prefetch_buffers.h"
#include "codegen/plan_producer_tiles.h"
#include "codegen/plan_register_operands.h"
#include "codegen/plan_unordered_reductions.h"
#include "codegen/plan_pingpong.h"
#include "codegen/plan_late_products.h"
#include "codegen/plan_tile_barriers.h"
#include "codegen/schedule_products.h"
#include "codegen/plan_products_ahead.h"
#include "codegen/plan_exp2_on_fma.h"
#include "codegen/plan_warp_uniform_scalars.h"
#include "codegen/plan_rescale_skips.h"
#include "codegen/plan_scratch.h"
#include "codegen/plan_tma_copies.h"
#include "codegen/plan_tma_stores.h"
#include "codegen/plan_warp_specialization.h"
#include "codegen/prelude.h"
#include "codegen/schedule_async_copies.h"
#include "dsl/printer.h"
#include "dsl/verifier.h"
#include "support/env.h"

#include <algorithm>
#include <cstdio>

namespace kiln {

namespace {

bool log_passes() { return env_choice("KILN_LOG", {"passes"}).has_value(); }

// MIN_BLOCKS_PER_SM CTAs of `threads` each must fit on one SM of the target.
void check_resident_blocks(const Kernel& k, const Target& target, int64_t threads) {
  const int64_t blocks = k.config.get_or("MIN_BLOCKS_PER_SM", 1);
  if (blocks > target.max_blocks_per_sm() || blocks * threads > target.max_threads_per_sm())
    throw TargetLimitError(fmt::format(
        "kernel '{}' ({}): MIN_BLOCKS_PER_SM={} asks for {} resident CTAs of {} threads on one SM; {} holds at most "
        "{} CTAs and {} threads an SM: lower MIN_BLOCKS_PER_SM or num_warps",
        k.name, k.config.str(), blocks, blocks, threads, target.arch(), target.max_blocks_per_sm(),
        target.max_threads_per_sm()));
}

// `bytes` of shared memory (`what` needs them) must fit in one block of the target.
void check_shared_bytes(const Kernel& k, const Target& target, int64_t bytes, const char* what) {
  if (bytes > target.max_shared_bytes_per_block())
    throw TargetLimitError(fmt::format("kernel '{}' ({}): {} need {} bytes of shared memory; {} allows at most {} "
                                       "per block: use smaller tiles or fewer stages",
                                       k.name, k.config.str(), what, bytes, target.arch(),
                                       target.max_shared_bytes_per_block()));
}

} // namespace

std::string CodegenOptions::str() const {
  return fmt::format(
      "tensor_cores={} swizzle={} async_copy={} vectorize={} wgmma={} tma={} warp_specialize={} persistent={} "
      "pingpong={} product_ahead={} late_product={} product_schedule={} warp_uniform={} tile_barriers={} "
      "late_across_loops={} prefetch_buffers={} rotated_stage_writes={} register_operands={} tma_stores={} "
      "producer_tiles={} tma_reductions={}",
      int(tensor_cores), int(swizzle), int(async_copy), int(vectorize), int(wgmma), int(tma), int(warp_specialize),
      int(persistent), int(pingpong), int(product_ahead), int(late_product), int(product_schedule),
      int(warp_uniform), int(tile_barriers), int(late_across_loops), int(prefetch_buffers),
      int(rotated_stage_writes), int(register_operands), int(tma_stores), int(producer_tiles),
      int(tma_reductions));
}

LoweringPlan plan_lowering(const Kernel& k, const Target& target, const CodegenOptions& options) {
  LoweringPlan plan = assign_layouts(k, target, options);
  plan_shared_memory(plan);
  choose_dot_lowering(k, target, options, plan);
  schedule_async_copies(k, target, options, plan);
  plan_tma_copies(k, target, options, plan);
  plan_warp_specialization(k, target, options, plan);
  plan_pingpong(k, options, plan);
  plan_products_ahead(k, options, plan);
  plan_late_products(k, options, plan);
  plan_tile_barriers(k, options, plan);
  plan_persistent_grid(k, options, plan);
  analyze_contiguity(k, target, options, plan);
  plan_layout_conversions(k, plan);
  plan_scratch(k, plan);
  schedule_products(k, options, plan);
  plan_bulk_reductions(k, target, options, plan);
  plan_prefetch_buffers(k, target, options, plan);
  plan_producer_tiles(k, options, plan);
  plan_tma_stores(k, target, options, plan);
  plan_unordered_reductions(k, plan);
  plan_rescale_skips(k, plan);
  plan_exp2_on_fma(k, plan);
  plan_register_operands(k, target, options, plan);
  plan_warp_uniform_scalars(k, options, plan);
  return plan;
}

GeneratedKernel generate_cuda(const Kernel& k, const Target& target, const CodegenOptions& options) {
  bool log = log_passes();
  verify(k);
  check_resident_blocks(k, target, 32 * k.config.num_warps);
  if (log)
    std::fprintf(stderr, "// ---- after verify ----\n%s", print_kernel(k).c_str());
  LoweringPlan plan = plan_lowering(k, target, options);
  // Before emitting code for tiles or threads that cannot exist.
  check_shared_bytes(k, target, plan.tiles_bytes, "its shared tiles");
  check_resident_blocks(k, target, plan.ws.threads());
  const int64_t dynamic_bytes =
      std::max({plan.tiles_bytes + plan.scratch_bytes, plan.bulk.end(), plan.persistent.second_buffers_end,
                plan.tma_stores.end()});
  check_shared_bytes(k, target, dynamic_bytes + plan.static_shared_bytes(),
                     plan.bulk.any() ? "its shared tiles, conversion scratch, TMA barriers and bulk-reduction stage"
                                     : "its shared tiles, conversion scratch and TMA barriers");
  GeneratedKernel g;
  g.name = k.name;
  g.threads = plan.ws.threads();
  g.shared_bytes = static_cast<int>(dynamic_bytes);
  g.static_shared_bytes = static_cast<int>(plan.static_shared_bytes());
  g.lowered = describe_plan(k, plan);
  g.tensor_maps = plan.tma.maps;
  g.tma_store_maps = static_cast<int>(plan.tma_stores.ops.size());
  g.producer_tile_maps = static_cast<int>(plan.producer_tiles.tiles.size());
  g.why_not_warp_specialized = plan.ws.why_not;
  g.persistent_ctas_per_sm = plan.persistent.on ? plan.persistent.ctas_per_sm : 0;
  g.persistent_dynamic = plan.persistent.dynamic();
  g.why_not_persistent = plan.persistent.why_not;
  g.why_not_pingpong = plan.pingpong.why_not;
  g.why_not_product_ahead = plan.ahead.why_not;
  g.why_not_late_product = plan.late.why_not;
  g.why_not_tile_barriers = plan.ws.why_not_tile_barriers;
  if (log)
    std::fprintf(stderr,
                 "// ---- after assign_layouts, plan_shared_memory, choose_dot_lowering, schedule_async_copies, "
                 "plan_tma_copies, plan_warp_specialization, plan_pingpong, plan_products_ahead, plan_late_products, plan_tile_barriers, plan_persistent_grid, analyze_contiguity, plan_layout_conversions, plan_scratch, "
                 "schedule_products, plan_bulk_reductions, plan_prefetch_buffers, plan_producer_tiles, plan_tma_stores, plan_unordered_reductions, plan_rescale_skips, plan_exp2_on_fma, plan_register_operands, plan_warp_uniform_scalars ----\n%s",
                 g.lowered.c_str());
  const std::string body = emit_cuda(k, plan, target, options);
  g.source = fmt::format("// Generated by kiln {} for {} from kernel '{}'\n// config: {}\n{}\n",
                         KILN_VERSION_STRING, target.arch(), k.name, k.config.str(), g.lowered);
  g.source += prelude_source();
  g.source += "\n" + body;
  if (plan.ws.on()) {
    CodegenOptions unspecialized = options;
    unspecialized.warp_specialize = false;
    g.illegal_maps_fallback = std::make_shared<const GeneratedKernel>(generate_cuda(k, target, unspecialized));
  }
  return g;
}

} // namespace kiln
