// One benchmark measurement as kiln_bench reports it: which case (a key shared with bench/peers.py so
// that the two outputs join), which system ran it, the config, the correctness check that had to pass
// before the time counted, and the time with its derived rate. Owns the JSON form of a record.
#pragma once

#include "codegen/codegen.h"
#include "dsl/dtype.h"

#include <llvm/Support/JSON.h>

#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace kiln::bench {

inline constexpr double kNotMeasured = std::numeric_limits<double>::quiet_NaN();

// How the output was held to its double-precision reference.
struct CheckResult {
  std::string method;              // "full", "sampled", "exact"
  int64_t elements = 0;            // output elements compared
  double error = kNotMeasured;     // relative L2 error of the main output (max |diff| for "exact")
  double lse_error = kNotMeasured; // attention only: relative L2 error of the logsumexp
  double tolerance = kNotMeasured;
  int64_t nonfinite_mismatches = 0;
  bool ok = false;
};

struct CaseRecord {
  // Identity. `key` names the problem (suite, op, dtype, shape, masking) and is what peers.py writes too;
  // `system` names who solved it ("kiln_fa2", "kiln_fa2_krow", "sdpa_flash", ...).
  std::string key;
  std::string suite; // "attention", "matmul", "memory", "seeds"
  std::string op;    // "attention", "matmul", "vector_add", "softmax"
  std::string system;
  std::string dtype;
  std::vector<std::pair<std::string, int64_t>> shape; // ordered, e.g. B, H, N, D
  int causal = -1;                                    // attention: 0 none, 1 top-left; -1 elsewhere
  std::string note;                                   // what distinguishes this system's variant, if anything
  std::string codegen; // the code generator's switches when not all on ("tensor_cores=1 swizzle=0 ...")

  // Work, fixed by the shape: FLOPs for compute-bound ops, bytes read + written for memory-bound ones.
  double flops = 0, bytes = 0;

  // Filled in by the run.
  std::string config; // Config::str() of the kernel that ran
  CheckResult check;
  double time_ms = kNotMeasured; // median of `reps` event-timed launches
  int reps = 0, warmup = 0;
  bool l2_flushed = false;
  std::string error;       // why the case has no time (compile failure, wrong output, ...)
  double wall_seconds = 0; // the whole case on the host clock: compile, inputs, check, timing
  // Figures particular to a suite (the compile suite's phases, the tuner's table, the model's prediction),
  // written under "extra" as they are; report.py reads them by name.
  llvm::json::Object extra;

  // time_ms is a kernel's event-timed median, or for the compile and autotune suites a host-clock latency
  // (extra.timer says "host"); either way it counts only when the check passed.
  bool ok() const { return check.ok && error.empty() && time_ms == time_ms; }
  double tflops() const { return flops > 0 && ok() ? flops / (time_ms * 1e-3) / 1e12 : kNotMeasured; }
  double gbps() const { return bytes > 0 && ok() ? bytes / (time_ms * 1e-3) / 1e9 : kNotMeasured; }
};

// The canonical key of a problem: "<op>:<dtype>:<name><value>:...[:causal<c>]", e.g.
// "attention:f16:B16:H16:N1024:D128:causal0" or "matmul:bf16:M4096:N4096:K4096". peers.py builds the
// same string from the same fields (case_key in bench/peers_harness.py).
std::string case_key(const std::string& op, const std::string& dtype,
                     const std::vector<std::pair<std::string, int64_t>>& shape, int causal);

// A record's identity as every kernel suite fills it in: the fields, the key made from them, and the code
// generator's switches (kept only when one is off).
CaseRecord case_record(const std::string& suite, const std::string& op, const std::string& system,
                       const std::string& note, DType dtype,
                       std::vector<std::pair<std::string, int64_t>> shape, int causal,
                       const CodegenOptions& codegen);

llvm::json::Value to_json(const CaseRecord& r);

// JSON has no NaN or infinity: a figure that was not measured (or is infinite) is written as null.
llvm::json::Value number_or_null(double v);

} // namespace kiln::bench
