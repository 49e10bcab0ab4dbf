// Per-kernel metrics from Nsight Compute (ncu): the command that collects them, and reading its CSV.
// `kiln compare-loads` uses them for shared-memory bank conflicts where ncu is installed.
#pragma once

#include <map>
#include <string>
#include <vector>

namespace kiln::cli {

// Shared-memory bank conflicts, and the wavefronts they are part of, over all shared loads and stores.
inline const char* const kSharedBankConflicts = "l1tex__data_bank_conflicts_pipe_lsu_mem_shared.sum";
inline const char* const kSharedWavefronts = "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum";

// ncu's arguments to collect `metrics` for the first launch of a kernel whose name matches `kernel_regex`
// in the program `command` (its path, then its arguments), as CSV.
std::vector<std::string> ncu_arguments(const std::vector<std::string>& metrics, const std::string& kernel_regex,
                                       const std::vector<std::string>& command);

// The metric values ncu printed as CSV (`--csv`, one row per metric: "Metric Name" and "Metric Value"
// columns, thousands separators allowed) for the first kernel it profiled. A kiln::Error naming what is
// missing when the text has no such table or a metric is absent or not a number.
std::map<std::string, double> parse_ncu_csv(const std::string& csv, const std::vector<std::string>& metrics);

} // namespace kiln::cli
