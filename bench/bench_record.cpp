#include "bench/bench_record.h"

#include <fmt/format.h>

#include <cmath>

namespace kiln::bench {

llvm::json::Value number_or_null(double v) {
  if (std::isfinite(v))
    return v;
  return nullptr;
}

std::string case_key(const std::string& op, const std::string& dtype,
                     const std::vector<std::pair<std::string, int64_t>>& shape, int causal) {
  std::string key = fmt::format("{}:{}", op, dtype);
  for (const auto& [name, value] : shape)
    key += fmt::format(":{}{}", name, value);
  if (causal >= 0)
    key += fmt::format(":causal{}", causal);
  return key;
}

CaseRecord case_record(const std::string& suite, const std::string& op, const std::string& system,
                       const std::string& note, DType dtype,
                       std::vector<std::pair<std::string, int64_t>> shape, int causal,
                       const CodegenOptions& codegen) {
  CaseRecord r;
  r.suite = suite;
  r.op = op;
  r.system = system;
  r.note = note;
  r.dtype = std::string(dtype_name(dtype));
  r.shape = std::move(shape);
  r.causal = causal;
  r.key = case_key(r.op, r.dtype, r.shape, causal);
  if (!codegen.all_on())
    r.codegen = codegen.str();
  return r;
}

llvm::json::Value to_json(const CaseRecord& r) {
  llvm::json::Object shape;
  for (const auto& [name, value] : r.shape)
    shape[name] = value;
  llvm::json::Object check{{"method", r.check.method},
                           {"elements", r.check.elements},
                           {"error", number_or_null(r.check.error)},
                           {"lse_error", number_or_null(r.check.lse_error)},
                           {"tolerance", number_or_null(r.check.tolerance)},
                           {"nonfinite_mismatches", r.check.nonfinite_mismatches},
                           {"ok", r.check.ok}};
  llvm::json::Object o{{"key", r.key},
                       {"suite", r.suite},
                       {"op", r.op},
                       {"system", r.system},
                       {"dtype", r.dtype},
                       {"shape", std::move(shape)},
                       {"note", r.note},
                       {"flops", r.flops},
                       {"bytes", r.bytes},
                       {"config", r.config},
                       {"check", std::move(check)},
                       {"time_ms", number_or_null(r.time_ms)},
                       {"tflops", number_or_null(r.tflops())},
                       {"gbps", number_or_null(r.gbps())},
                       {"reps", r.reps},
                       {"warmup", r.warmup},
                       {"l2_flushed", r.l2_flushed},
                       {"wall_seconds", r.wall_seconds},
                       {"ok", r.ok()},
                       {"error", r.error.empty() ? llvm::json::Value(nullptr) : llvm::json::Value(r.error)}};
  if (r.causal >= 0)
    o["causal"] = r.causal;
  if (!r.codegen.empty())
    o["codegen"] = r.codegen;
  if (!r.extra.empty())
    o["extra"] = llvm::json::Object(r.extra);
  return o;
}

} // namespace kiln::bench
