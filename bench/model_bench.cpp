#include "bench/model_bench.h"

#include "bench/attention_bench.h"

#include "analysis/perf_model.h"
#include "kernels/attention/fa2_fwd.h"

#include <fmt/format.h>

#include <utility>

namespace kiln::bench {

llvm::json::Object predict_fa2(const AttentionProblem& p, const Config& config, const rt::PeakRates& peaks) {
  const KernelDef def = fa2_fwd_def();
  const SizeArgs sizes = attention_size_args(p);
  ScalarArgs scalars;
  for (const auto& [name, value] : sizes)
    scalars[name] = static_cast<double>(value);
  const Kernel k = def.build(config);
  const CostEstimate e = estimate_cost(k, def.grid(config, sizes), scalars);
  const Roofline r = roofline(e, peaks.tflops, peaks.gbps);
  return llvm::json::Object{{"block_m", config.get("BLOCK_M")},
                            {"block_n", config.get("BLOCK_N")},
                            {"predicted_ms", r.time_s() * 1e3},
                            {"compute_ms", r.compute_s * 1e3},
                            {"memory_ms", r.memory_s * 1e3},
                            {"bound", r.compute_bound() ? "compute" : "memory"},
                            {"matrix_flops", e.total.matrix_flops},
                            {"vector_flops", e.total.vector_flops},
                            {"bytes_loaded", e.total.bytes_loaded},
                            {"bytes_stored", e.total.bytes_stored},
                            {"intensity", e.intensity()},
                            {"programs", e.programs},
                            {"programs_evaluated", e.programs_evaluated},
                            {"peak_tflops", peaks.tflops},
                            {"peak_gbps", peaks.gbps},
                            {"peaks_from", peaks.from}};
}

std::vector<BenchCase> model_cases(const BenchOptions& options) {
  auto cache = make_attention_data_cache();
  std::vector<BenchCase> cases;
  const bool q = options.quick;
  // Tiles from FA2's config space, all with 4 warps and 2 stages, so that the tile is what varies.
  const std::vector<std::pair<int64_t, int64_t>> tiles =
      q ? std::vector<std::pair<int64_t, int64_t>>{{64, 64}, {128, 64}}
        : std::vector<std::pair<int64_t, int64_t>>{{64, 32}, {64, 64}, {128, 64}, {128, 128}};
  const std::vector<int64_t> lengths =
      q ? std::vector<int64_t>{1024, 4096} : std::vector<int64_t>{1024, 4096, 16384};
  // N-major, so that one upload serves every tile at a length.
  for (int64_t N : lengths)
    for (auto [bm, bn] : tiles) {
      const AttentionProblem p = sweep_problem(DType::f16, N, 64, 0);
      Config config = default_fa2_config(p);
      config.set("BLOCK_M", bm).set("BLOCK_N", bn);
      config.num_warps = 4;
      config.num_stages = 2;
      AttentionCaseSpec spec;
      spec.suite = "model";
      spec.system = fmt::format("kiln_fa2_m{}_n{}", bm, bn);
      spec.note = fmt::format("BLOCK_M={} BLOCK_N={}", bm, bn);
      spec.problem = p;
      spec.config = config;
      spec.tunable = false;
      BenchCase c = attention_case(spec, options, cache);
      auto measure = std::move(c.run);
      c.run = [measure, p, config](Session& s, const JitKernel& k, CaseRecord& r) {
        // The prediction first (CPU only): a model that cannot evaluate the kernel fails the case.
        llvm::json::Object predicted = predict_fa2(p, config, rt::nominal_peak_rates(rt::current_device()));
        for (auto& [name, value] : predicted)
          r.extra[name] = value;
        measure(s, k, r);
        if (r.ok())
          r.extra["predicted_over_measured"] = r.extra.getNumber("predicted_ms").getValue() / r.time_ms;
      };
      cases.push_back(std::move(c));
    }
  return cases;
}

} // namespace kiln::bench
