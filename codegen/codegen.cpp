// The lowering script: one readable sequence of passes, each logged when KILN_LOG=passes.
#include "codegen/codegen.h"

#include "codegen/analyze_contiguity.h"
#include "codegen/assign_layouts.h"
#include "codegen/choose_dot_lowering.h"
#include "codegen/emit_cuda.h"
#include "codegen/prelude.h"
#include "codegen/schedule_async_copies.h"
#include "codegen/wgmma.h"
#include "dsl/printer.h"
#include "dsl/verifier.h"
#include "support/env.h"

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

std::string describe_plan(const Kernel& k, const LoweringPlan& plan, const EmittedKernel& e) {
  std::string s = fmt::format("// lowered {} for {} warps (mma warps {}x{})\n", k.name, plan.num_warps,
                              plan.warps.warps_m, plan.warps.warps_n);
  for (const SharedTile& t : plan.tiles)
    s += fmt::format("//   shared tile %{}: {} x {} ({} B/elem) x {} stage(s) at byte {}{}{}\n", t.value,
                     t.rows, t.cols, t.elem_bytes, t.stages, t.offset,
                     t.stages > 1 ? ", cp.async pipelined" : "",
                     plan.unwaited_loads.count(t.load) ? ", waited for by the next pipelined loop" : "");
  // Dots and pipelined loops in program order, with the DSL line each comes from.
  walk(k.body, [&](const Op& op) {
    if (op.kind == OpKind::Dot) {
      const DotPlan& d = plan.dots.at(&op);
      auto source = [&](ValueId v) {
        if (plan.where(v) == Placement::Shared) {
          if (d.instruction != DotInstruction::Wgmma)
            return std::string("shared");
          // wgmma reads it through a descriptor: K-major when K is the tile's contiguous dim.
          const bool is_a = v == op.operands[0];
          const bool k_major = plan.contiguous_dim(v) == (is_a ? 1 : 0);
          std::optional<WgmmaOperand> o = wgmma_operand(plan.tiles[plan.tile_of.at(v)], k_major);
          return fmt::format("shared {}-major ({})",
                             k_major ? "K"
                             : is_a  ? "M"
                                     : "N",
                             o ? o->descriptor().str() : "no descriptor");
        }
        return std::string(plan.fused_casts.count(v) ? "registers (cast fused)" : "registers");
      };
      const Shape& a = k.type(op.operands[0]).shape;
      const Shape& b = k.type(op.operands[1]).shape;
      s += fmt::format("//   dot %{} ({}x{} @ {}x{}) at {}: {}, A {}, B {}{}{}\n", op.result(), a[0], a[1],
                       b[0], b[1], op.loc.str(), dot_instruction_name(d.instruction), source(op.operands[0]),
                       source(op.operands[1]), plan.is_deferred_dot(op) ? ", one product left in flight" : "",
                       d.why_not_wgmma.empty() ? "" : " (not wgmma: " + d.why_not_wgmma + ")");
    } else if (auto it = plan.accesses.find(&op); it != plan.accesses.end()) {
      const AccessPlan& a = it->second;
      if (a.vector > 1 || a.reduce_only)
        s += fmt::format("//   {} at {}: {}{}{}\n",
                         op.kind == OpKind::Load    ? "load"
                         : op.kind == OpKind::Store ? "store"
                                                    : "atomic_add",
                         op.loc.str(),
                         a.vector > 1 ? fmt::format("{}-element vectors", a.vector) : "element by element",
                         a.aligned ? " (aligned by multiple_of)" : "",
                         a.reduce_only ? ", as red (old values unread)" : "");
    } else if (op.kind == OpKind::For) {
      auto it = plan.pipelined.find(&op);
      if (it == plan.pipelined.end())
        return;
      const int stages = plan.tiles[plan.tile_of.at(it->second.front()->result())].stages;
      s += fmt::format("//   loop at {}: {} tile(s) in a {}-stage ring, issued {} iteration(s) ahead\n",
                       op.loc.str(), it->second.size(), stages, plan.lookahead(&op, stages));
    }
  });
  std::map<std::string, int> kinds;
  for (const auto& [v, l] : plan.layout)
    kinds[l.kind_name()]++;
  for (const auto& [kind, n] : kinds)
    s += fmt::format("//   {} values in {} layouts\n", n, kind);
  s += fmt::format(
      "//   shared memory: tiles {} B + scratch {} B; layout conversions through shared memory: {}\n",
      plan.tiles_bytes, e.scratch_bytes, e.conversions);
  for (const std::string& note : e.conversion_notes)
    s += fmt::format("//     convert {}\n", note);
  return s;
}

} // namespace

std::string CodegenOptions::str() const {
  return fmt::format("tensor_cores={} swizzle={} async_copy={} vectorize={} wgmma={}", int(tensor_cores),
                     int(swizzle), int(async_copy), int(vectorize), int(wgmma));
}

GeneratedKernel generate_cuda(const Kernel& k, const Target& target, const CodegenOptions& options) {
  bool log = log_passes();
  verify(k);
  check_resident_blocks(k, target, 32 * k.config.num_warps);
  if (log)
    std::fprintf(stderr, "// ---- after verify ----\n%s", print_kernel(k).c_str());
  LoweringPlan plan = assign_layouts(k, target, options);
  int64_t tiles = plan_shared_memory(plan);
  check_shared_bytes(k, target, tiles, "its shared tiles"); // before emitting code for tiles that cannot exist
  choose_dot_lowering(k, target, options, plan);
  schedule_async_copies(k, target, options, plan);
  analyze_contiguity(k, target, options, plan);
  EmittedKernel e = emit_cuda(k, plan, target, options);
  check_shared_bytes(k, target, tiles + e.scratch_bytes, "its shared tiles and conversion scratch");
  GeneratedKernel g;
  g.name = k.name;
  g.threads = 32 * k.config.num_warps;
  g.shared_bytes = static_cast<int>(tiles + e.scratch_bytes);
  g.lowered = describe_plan(k, plan, e);
  if (log)
    std::fprintf(
        stderr,
        "// ---- after assign_layouts, plan_shared_memory, choose_dot_lowering, schedule_async_copies, "
        "emit_cuda ----\n%s",
        g.lowered.c_str());
  g.source = fmt::format("// Generated by kiln {} for {} from kernel '{}'\n// config: {}\n{}\n",
                         KILN_VERSION_STRING, target.arch(), k.name, k.config.str(), g.lowered);
  g.source += prelude_source();
  g.source += "\n" + e.body;
  return g;
}

} // namespace kiln
