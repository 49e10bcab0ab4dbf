#include "bench/ablation_bench.h"

#include "bench/attention_bench.h"
#include "bench/attention_bwd_bench.h"
#include "bench/matmul_bench.h"
#include "bench/memory_bench.h"

#include "codegen/codegen.h"
#include "support/error.h"

#include <fmt/ranges.h>

namespace kiln::bench {

std::vector<AblationVariant> ablation_variants() {
  std::vector<AblationVariant> out;
  out.push_back({"all_on", CodegenOptions{}});
  CodegenOptions o;
  o.tensor_cores = false;
  out.push_back({"no_tensor_cores", o});
  o = {};
  o.swizzle = false;
  out.push_back({"no_swizzle", o});
  o = {};
  o.async_copy = false;
  out.push_back({"no_async_copy", o});
  o = {};
  o.vectorize = false;
  out.push_back({"no_vectorize", o});
  o = {};
  o.wgmma = false; // sm_90a: mma.sync instead of warpgroup MMA (elsewhere the code does not change)
  out.push_back({"no_wgmma", o});
  o = {};
  o.tma = false; // sm_90a: cp.async by every thread instead of TMA copies (elsewhere the code does not change)
  out.push_back({"no_tma", o});
  o = {};
  o.warp_specialize = false; // sm_90a, configs with WARP_SPECIALIZE=1: every thread issues the copies and meets a
                             // CTA barrier each step (elsewhere the code does not change)
  out.push_back({"no_warp_specialize", o});
  o = {};
  o.persistent = false; // configs with PERSISTENT=1: one CTA per program id (elsewhere the code does not change)
  out.push_back({"no_persistent", o});
  o = {};
  o.pingpong = false; // configs with PINGPONG=1: each consumer warpgroup issues its products as soon as it reaches
                      // them (elsewhere the code does not change)
  out.push_back({"no_pingpong", o});
  o = {};
  o.product_ahead = false; // configs with PRODUCT_AHEAD=1: each product issued where the program computes it
                           // (elsewhere the code does not change)
  out.push_back({"no_product_ahead", o});
  o = {};
  o.late_product = false; // configs with LAST_PRODUCT_LATE=1: each last product issued where the program computes
                          // it (elsewhere the code does not change)
  out.push_back({"no_late_product", o});
  o = {};
  o.product_schedule = false; // sm_90a: each product waited for right after its issue (elsewhere the code does
                                  // not change)
  out.push_back({"no_product_schedule", o});
  o = {};
  o.warp_uniform = false; // sm_90a: scalar loads and wgmma loops' bounds read plainly (elsewhere the code does not
                          // change)
  out.push_back({"no_warp_uniform", o});
  o = {};
  o.tile_barriers = false; // configs with TILE_BARRIERS=1: one full and one empty mbarrier a ring slot (elsewhere
                           // the code does not change)
  out.push_back({"no_tile_barriers", o});
  o = {};
  o.late_across_loops = false; // configs with LAST_PRODUCT_LATE=1 and two key loops: each loop issues its own last
                               // late products after its end (elsewhere the code does not change)
  out.push_back({"no_late_across_loops", o});
  o = {};
  o.prefetch_buffers = false; // static persistent warp-specialised configs: one buffer for a prefetched tile, the
                              // next program's copy issued after this one's last read (elsewhere the code does not
                              // change)
  out.push_back({"no_prefetch_buffers", o});
  o = {};
  o.rotated_stage_writes = false; // sm_90 bulk-reduction stages (the fused backward's dQ adds): every lane writes
                                  // its registers in order (elsewhere the code does not change)
  out.push_back({"no_rotated_stage_writes", o});
  o = {};
  o.register_operands = false; // sm_90a warp-specialised kernels (dK/dV and dQ at D = 64): a product's loop-invariant
                               // A read from shared memory by every product (elsewhere the code does not change)
  out.push_back({"no_register_operands", o});
  o = {};
  o.tma_stores = false; // sm_90a warp-specialised kernels: a finished tile (O, dK and dV, C) stored from registers,
                        // piece by piece, instead of through a shared stage by TMA (elsewhere the code does not change)
  out.push_back({"no_tma_stores", o});
  o = {};
  o.producer_tiles = false; // sm_90a warp-specialised kernels: a tile loaded once before the loops (FA2's Q, dK/dV's K
                            // and V) copied by the consumers' cp.async, not by the producer's TMA (elsewhere the code
                            // does not change)
  out.push_back({"no_producer_tiles", o});
  o = {};
  o.tma_reductions = false; // sm_90a warp-specialised kernels: a staged f32 atomic_add (the fused backward's dQ) added
                            // by bulk reductions of a row-major stage written in a rotated order, not by TMA tensor
                            // reductions of a swizzled one (the deterministic backward has none: unchanged)
  out.push_back({"no_tma_reductions", o});
  return out;
}

CodegenOptions switched_off_options(const std::string& name) {
  std::vector<std::string> names;
  for (const AblationVariant& v : ablation_variants()) {
    if (v.options.all_on())
      continue;
    if (v.name == name)
      return v.options;
    names.push_back(v.name);
  }
  fail("--switch-off: expected one of the ablation's variants ({}), got '{}'", fmt::join(names, ", "), name);
}

namespace {

// Runs the case as usual, and records beside it which variant and workload it is and whether the switch
// changed the generated code at all (a switch that does not apply to a kernel, such as tensor cores for
// exact f32 dots, leaves the source as it was: its time is then a measure of run-to-run noise).
BenchCase tag_variant(BenchCase c, const std::string& workload, const AblationVariant& variant) {
  c.record.extra["workload"] = workload;
  c.record.extra["variant"] = variant.name;
  auto inner = std::move(c.run);
  c.run = [inner, def = c.def, config = c.config,
           all_on = variant.options.all_on()](Session& s, const JitKernel& k, CaseRecord& r) {
    bool same = all_on;
    if (!all_on) {
      const GeneratedKernel reference = generate_cuda(def.build(config), Target::parse(k.compiled().arch));
      same = reference.source == k.generated().source;
    }
    r.extra["same_code_as_all_on"] = same;
    inner(s, k, r);
  };
  return c;
}

} // namespace

std::vector<BenchCase> ablation_cases(const BenchOptions& options) {
  auto cache = make_attention_data_cache();
  std::vector<BenchCase> cases;
  struct AttentionWorkload {
    std::string label, system;
    AttentionProblem problem;
  };
  std::vector<AttentionWorkload> attention;
  // The CUDA worklog's shape: one head, N_Q = N_K = 8192, D = 32, f32 (exact FMA dots, and tf32 MMA).
  AttentionProblem f32 = single_problem(DType::f32, 1, 1, 8192, 32, 0);
  attention.push_back({"FA2 f32 exact, B1 H1 N8192 D32 (CUDA worklog)", "kiln_fa2", f32});
  f32.tf32 = true;
  if (!options.quick)
    attention.push_back({"FA2 f32 tf32, B1 H1 N8192 D32 (CUDA worklog)", "kiln_fa2_tf32", f32});
  attention.push_back({"FA2 f16, B4 H32 N4096 D64", "kiln_fa2", sweep_problem(DType::f16, 4096, 64, 0)});
  // D = 128: twice the bytes a key step copies (where TMA's one-thread copies replace the most cp.async work).
  if (!options.quick)
    attention.push_back({"FA2 f16, B4 H16 N4096 D128", "kiln_fa2", sweep_problem(DType::f16, 4096, 128, 0)});
  // Causal: two key loops a query tile (its unmasked and its masked tiles), where late products continue from one to
  // the next (late_across_loops) and a tile's work varies.
  if (!options.quick)
    attention.push_back(
        {"FA2 f16 causal, B4 H16 N4096 D128", "kiln_fa2", sweep_problem(DType::f16, 4096, 128, 1)});

  for (const AttentionWorkload& w : attention)
    for (const AblationVariant& v : ablation_variants()) {
      AttentionCaseSpec spec;
      spec.suite = "ablation";
      spec.system = w.system + "/" + v.name;
      spec.note = v.name;
      spec.problem = w.problem;
      spec.tunable =
          false; // default_fa2_config (with --config), never the tuner's pick: one config throughout
      spec.codegen = v.options;
      cases.push_back(tag_variant(attention_case(spec, options, cache), w.label, v));
    }
  // The backward at its default tiles: four products a step in dK/dV, three in dQ (the product schedule's case).
  if (!options.quick) {
    auto bwd_cache = make_attention_bwd_data_cache();
    const AttentionProblem bwd = sweep_problem(DType::f16, 4096, 64, 0);
    for (const AblationVariant& v : ablation_variants())
      cases.push_back(tag_variant(
          attention_bwd_ablation_case(bwd, "kiln_fa2_bwd/" + v.name, v.name, v.options, bwd_cache),
          "FA2 backward f16, B4 H32 N4096 D64", v));
  }
  if (!options.quick)
    for (const AblationVariant& v : ablation_variants())
      cases.push_back(tag_variant(matmul_case(MatmulProblem{4096, 4096, 4096, DType::f16}, options,
                                              "ablation", "kiln_matmul/" + v.name, v.name, v.options),
                                  "matmul f16 4096³", v));
  // Memory-bound: where 16-byte vectorised access shows (FA2 and matmul stage their tiles with cp.async,
  // which the vectorize switch does not touch).
  for (const AblationVariant& v : ablation_variants())
    cases.push_back(tag_variant(softmax_case(SoftmaxProblem{16384, 4096, DType::f16}, "ablation",
                                             "kiln_softmax/" + v.name, v.name, v.options),
                                "row softmax f16 16384 × 4096", v));
  return cases;
}

} // namespace kiln::bench
