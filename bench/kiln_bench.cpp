// kiln_bench: measures kiln's kernels on the current GPU (attention FA2/FA1, matmul, memory-bound
// kernels, the seed experiments). Every case is checked against a double-precision reference before it
// is timed; results go to stderr as they come and to a JSON file (rewritten after every case, so an
// interrupted run keeps what it measured). See docs/bench/README.md.
#include "bench/ablation_bench.h"
#include "bench/attention_bench.h"
#include "bench/attention_bwd_bench.h"
#include "bench/autotune_bench.h"
#include "bench/bench_session.h"
#include "bench/child_probe.h"
#include "bench/compile_bench.h"
#include "bench/matmul_bench.h"
#include "bench/memory_bench.h"
#include "bench/model_bench.h"
#include "bench/mods_bench.h"
#include "bench/self_test.h"
#include "bench/user_kernels_bench.h"

#include "runtime/cuda_driver.h"
#include "runtime/device.h"
#include "runtime/nvrtc.h"
#include "support/error.h"
#include "support/output_set.h"
#include "support/version.h"

#include <llvm/Support/CommandLine.h>
#include <llvm/Support/FormatVariadic.h>
#include <llvm/Support/JSON.h>
#include <llvm/Support/raw_ostream.h>

#include <fmt/format.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>

namespace cl = llvm::cl;
using namespace kiln;
using namespace kiln::bench;

namespace {

cl::OptionCategory category("kiln_bench options");

cl::list<std::string> suite_args(cl::Positional, cl::desc("[suite...]"), cl::cat(category));
cl::list<std::string>
    suite_opt("suite",
              cl::desc("Suites to run: attention, attention_bwd, matmul, memory, seeds, ablation, compile, "
                       "autotune, model, user, all (default all)"),
              cl::CommaSeparated, cl::value_desc("name,..."), cl::cat(category));
cl::opt<std::string> json_path("json", cl::desc("Write every result to this JSON file"),
                               cl::value_desc("FILE"), cl::cat(category));
cl::opt<bool> quick("quick", cl::desc("A small subset of every suite (smoke runs)"), cl::cat(category));
cl::opt<bool> tune("tune",
                   cl::desc("Time FA2, matmul, softmax and vector add with the autotuner's pick for each "
                            "shape (as attention::forward does)"),
                   cl::cat(category));
cl::opt<bool> tune_bwd("tune-bwd",
                       cl::desc("attention_bwd: tune the backward's dK/dV and dQ kernels per shape too "
                                "(implies --tune; without it they run default_bwd_configs)"),
                       cl::cat(category));
cl::opt<int> reps("reps", cl::desc("Timed launches per case, at most (median reported)"), cl::init(20),
                  cl::cat(category));
cl::opt<int> warmup("warmup", cl::desc("Untimed launches before timing"), cl::init(3), cl::cat(category));
cl::opt<double>
    case_budget_ms("case-budget-ms",
                   cl::desc("Fewer reps (at least 3) when --reps launches would take longer than this"),
                   cl::init(1500), cl::cat(category));
cl::opt<std::string> fa2_config("config",
                                cl::desc("Override FA2 params in every FA2 case: NAME=V,... "
                                         "(BLOCK_M, BLOCK_N, num_warps, num_stages, ...)"),
                                cl::value_desc("NAME=V,..."), cl::cat(category));
cl::opt<std::string> matmul_config("matmul-config", cl::desc("Override matmul params: NAME=V,..."),
                                   cl::value_desc("NAME=V,..."), cl::cat(category));
cl::opt<std::string> filter("filter", cl::desc("Only cases whose key or system contains this text"),
                            cl::cat(category));
cl::opt<std::string> switch_off("switch-off",
                                cl::desc("Run the attention sweep's, its backward's and the seeds' cases with one "
                                         "code-generator switch off: an ablation variant's name, e.g. "
                                         "no_prefetch_buffers"),
                                cl::value_desc("VARIANT"), cl::cat(category));
cl::opt<uint64_t> seed("seed", cl::desc("Seed of the random inputs"), cl::init(20240607), cl::cat(category));
cl::opt<bool> list_only("list",
                        cl::desc("List the cases (and write them to --json) without running anything"),
                        cl::cat(category));
cl::opt<bool>
    precompile("precompile",
               cl::desc("Only generate and compile every case's kernel into the compile cache (no GPU "
                        "needed with --arch)"),
               cl::cat(category));
cl::opt<bool> self_test("self-test",
                        cl::desc("Check the harness itself on the CPU (references, fills, keys)"),
                        cl::cat(category));
cl::opt<std::string>
    arch("arch",
         cl::desc("Target of --precompile, and of the compile suite on a machine with no GPU "
                  "(compiles without loading; default: the current device's)"),
         cl::value_desc("sm_XY"), cl::cat(category));
cl::opt<std::string> shard("shard",
                           cl::desc("With --precompile: compile only the I-th of N parts (0-based), so "
                                    "that N processes can share the work"),
                           cl::value_desc("I/N"), cl::cat(category));

// Hidden: the child side of the compile and autotune suites (see child_probe.h).
cl::opt<std::string> probe("probe", cl::desc("Run one probe (compile, tune) and write its JSON"), cl::Hidden,
                           cl::cat(category));
cl::opt<std::string> probe_dir("probe-dir", cl::desc("The probe's cache root"), cl::Hidden,
                               cl::cat(category));
cl::opt<std::string> probe_out("probe-out", cl::desc("Where the probe writes its JSON"), cl::Hidden,
                               cl::cat(category));
cl::opt<std::string> probe_mode("probe-mode", cl::desc("The tune probe's autotune mode"), cl::Hidden,
                                cl::cat(category));

// Every suite in the order it runs (cheapest compiles and data first, so that a quick look at the output
// shows the sweep's suites early), with the seconds it is expected to take on an H100/H200, standard and
// --quick: printed before the run beside the actual times after it. The first four come from the H200 run
// of docs/bench (attention with --tune, plus FA1 on the whole f16 sweep); the other four are estimates from
// their parts (a compile ~1-1.5 s, a child process ~0.5 s, a tuning run ~5-10 s) until a run measures them.
struct SuiteInfo {
  const char* name;
  std::vector<BenchCase> (*cases)(const BenchOptions&);
  double estimate_s, quick_estimate_s;
};
const std::vector<SuiteInfo>& suite_table() {
  static const std::vector<SuiteInfo> table = {
      {"memory", memory_cases, 5, 3},          {"matmul", matmul_cases, 10, 5},
      {"attention", attention_cases, 230, 30}, {"seeds", seed_cases, 40, 15},
      {"attention_bwd", attention_bwd_cases, 155, 40},
      {"ablation", ablation_cases, 35, 15},    {"compile", compile_cases, 15, 8},
      {"autotune", autotune_cases, 30, 25},    {"model", model_cases, 20, 6},
      {"user", user_kernel_cases, 20, 10},     {"mods", mods_cases, 90, 40},
  };
  return table;
}

std::string suite_names() {
  std::string names;
  for (const SuiteInfo& s : suite_table())
    names += std::string(names.empty() ? "" : ", ") + s.name;
  return names;
}

std::set<std::string> selected_suites() {
  std::set<std::string> s;
  for (const std::string& name : suite_args)
    s.insert(name);
  for (const std::string& name : suite_opt)
    s.insert(name);
  std::set<std::string> known;
  for (const SuiteInfo& info : suite_table())
    known.insert(info.name);
  if (s.empty() || s.count("all"))
    return known;
  for (const std::string& name : s)
    if (!known.count(name))
      fail("unknown suite '{}'; expected {} or all", name, suite_names());
  return s;
}

std::vector<BenchCase> collect_cases(const BenchOptions& options, const std::set<std::string>& suites) {
  std::vector<BenchCase> all;
  for (const SuiteInfo& info : suite_table()) {
    if (!suites.count(info.name))
      continue;
    for (BenchCase& c : info.cases(options)) {
      if (!c.run_self)
        c.record.config = c.config.str();
      if (options.filter.empty() || c.record.key.find(options.filter) != std::string::npos ||
          c.record.system.find(options.filter) != std::string::npos)
        all.push_back(std::move(c));
    }
  }
  return all;
}

// Expected seconds per selected suite before the run; the sum of the cases' wall-clock seconds after it.
void print_suite_times(const std::set<std::string>& suites, const std::vector<BenchCase>* cases, bool quick,
                       double total_s) {
  std::string line;
  double expected = 0;
  for (const SuiteInfo& info : suite_table()) {
    if (!suites.count(info.name))
      continue;
    const double estimate = quick ? info.quick_estimate_s : info.estimate_s;
    expected += estimate;
    if (!cases) {
      line += fmt::format(" {} ~{:.0f} s,", info.name, estimate);
      continue;
    }
    double actual = 0;
    int n = 0;
    for (const BenchCase& c : *cases)
      if (c.record.suite == info.name)
        actual += c.record.wall_seconds, ++n;
    line += fmt::format(" {} {:.0f} s ({} cases, expected ~{:.0f}),", info.name, actual, n, estimate);
  }
  if (!line.empty())
    line.pop_back();
  if (!cases)
    fmt::print(stderr, "kiln_bench: expected time per suite:{}; ~{:.0f} s in all\n", line, expected);
  else
    fmt::print(stderr, "kiln_bench: time per suite:{}; {:.0f} s in all (expected ~{:.0f})\n", line, total_s,
               expected);
}

int run_probe_process() {
  ProbeArgs a;
  a.name = probe;
  a.dir = probe_dir;
  a.out = probe_out;
  a.mode = probe_mode;
  a.arch = arch;
  a.seed = seed;
  if (a.name == "compile")
    return run_compile_probe(a);
  if (a.name == "tune")
    return run_tune_probe(a);
  fail("--probe: expected compile or tune, got '{}'", a.name);
}

llvm::json::Object device_json() {
  std::string why;
  if (!rt::driver_available(&why))
    return llvm::json::Object{{"available", false}, {"why", why}};
  const rt::DeviceInfo& d = rt::current_device();
  return llvm::json::Object{{"available", true},
                            {"name", d.name},
                            {"ordinal", d.ordinal},
                            {"arch", d.arch},
                            {"compute_capability", fmt::format("{}.{}", d.cc_major, d.cc_minor)},
                            {"sm_count", d.sm_count},
                            {"clock_khz", d.clock_khz},
                            {"memory_clock_khz", d.memory_clock_khz},
                            {"memory_bus_bits", d.memory_bus_bits},
                            {"l2_bytes", d.l2_bytes},
                            {"total_memory_bytes", d.total_memory_bytes},
                            {"driver_version", d.driver_version}};
}

llvm::json::Value nvrtc_version_json() {
  if (!rt::nvrtc_available())
    return nullptr;
  return rt::nvrtc().version_string();
}

void write_json(const std::string& path, const llvm::json::Object& header,
                const std::vector<BenchCase>& cases, size_t done) {
  llvm::json::Object doc = header;
  llvm::json::Array records;
  for (size_t i = 0; i < done; ++i)
    records.push_back(to_json(cases[i].record));
  doc["cases"] = std::move(records);
  // All or nothing, so that a reader never sees half a file (support/output_set.h).
  write_output_file({"--json", path}, llvm::formatv("{0:2}", llvm::json::Value(std::move(doc))).str() + "\n");
}

std::string describe(const CaseRecord& r) {
  if (!r.error.empty())
    return "FAILED: " + r.error;
  if (r.flops == 0 && r.bytes == 0) // a latency (compile, tuning): no rate, no output error
    return fmt::format("{:9.2f} ms (host clock, median of {}; {:.1f} s)", r.time_ms, r.reps, r.wall_seconds);
  std::string rate =
      r.flops > 0 ? fmt::format("{:8.1f} TFLOP/s", r.tflops()) : fmt::format("{:8.1f} GB/s", r.gbps());
  return fmt::format("{:9.4f} ms {}  err {:.1e} ({}, reps {}, {:.1f} s)", r.time_ms, rate, r.check.error,
                     r.check.method, r.reps, r.wall_seconds);
}

int run_precompile(const std::vector<BenchCase>& cases) {
  std::string target = arch;
  if (target.empty()) // the device's arch, read without creating a context (many shards run at once)
    target = rt::query_device(rt::selected_device_ordinal()).arch;
  int64_t part = 0, parts = 1;
  if (!shard.empty()) {
    auto [i, n] = llvm::StringRef(shard).split('/');
    if (i.getAsInteger(10, part) || n.getAsInteger(10, parts) || parts < 1 || part < 0 || part >= parts)
      fail("--shard: expected I/N with 0 <= I < N, got '{}'", shard.getValue());
  }
  std::set<std::string> seen;
  int64_t index = 0, failures = 0;
  auto compile = [&](const KernelDef& def, const Config& config, const CodegenOptions& codegen) {
    std::string id = def.name + " " + config.str();
    if (!codegen.all_on())
      id += " [" + codegen.str() + "]";
    if (!seen.insert(id).second || index++ % parts != part)
      return;
    auto start = std::chrono::steady_clock::now();
    try {
      Session::precompile(def, config, codegen, target);
      double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      fmt::print(stderr, "compiled {} for {} in {:.1f} s\n", id, target, s);
    } catch (const std::exception& e) {
      ++failures;
      fmt::print(stderr, "FAILED to compile {} for {}: {}\n", id, target, e.what());
    }
  };
  for (const BenchCase& c : cases) {
    if (c.run_self) // compiles its own kernels, cold on purpose (the compile suite) or through the tuner
      continue;
    compile(c.def, c.config, c.codegen);
    for (const auto& [def, config] : c.more_kernels)
      compile(def, config, c.codegen);
  }
  return failures ? 1 : 0;
}

int run(int argc, char** argv) {
  cl::HideUnrelatedOptions(category);
  cl::ParseCommandLineOptions(
      argc, argv,
      "kiln_bench: kiln's kernels on the current GPU, checked, then timed.\n\n"
      "  kiln_bench [attention|attention_bwd|matmul|memory|seeds|ablation|compile|autotune|model|all]...\n"
      "             [--quick]\n"
      "             [--json FILE]\n");
  if (!probe.empty())
    return run_probe_process();
  if (self_test)
    return run_self_test() ? 1 : 0;
  if (reps < 1 || warmup < 0)
    fail("--reps must be at least 1 and --warmup at least 0, got {} and {}", reps.getValue(),
         warmup.getValue());
  BenchOptions options;
  options.quick = quick;
  options.tune = tune || tune_bwd;
  options.tune_bwd = tune_bwd;
  options.reps = reps;
  options.warmup = warmup;
  options.case_budget_ms = case_budget_ms;
  options.seed = seed;
  options.filter = filter;
  options.arch = arch;
  options.fa2_overrides = parse_overrides(fa2_config, "config");
  options.matmul_overrides = parse_overrides(matmul_config, "matmul-config");
  if (!switch_off.empty())
    options.sweep_codegen = switched_off_options(switch_off);
  const std::set<std::string> suites = selected_suites();
  std::vector<BenchCase> cases = collect_cases(options, suites);

  llvm::json::Array suite_names;
  for (const std::string& s : suites)
    suite_names.push_back(s);
  llvm::json::Object header{{"schema", "kiln-bench/1"},
                            {"tool", "kiln_bench"},
                            {"kiln_version", KILN_VERSION_STRING},
                            {"code_generator", code_generator_hash()},
                            {"nvrtc_version", nvrtc_version_json()},
                            {"options", llvm::json::Object{{"suites", std::move(suite_names)},
                                                           {"quick", options.quick},
                                                           {"reps", options.reps},
                                                           {"warmup", options.warmup},
                                                           {"case_budget_ms", options.case_budget_ms},
                                                           {"seed", static_cast<int64_t>(options.seed)},
                                                           {"tune", options.tune},
                                                           {"tune_bwd", options.tune_bwd},
                                                           {"config", fa2_config.getValue()},
                                                           {"matmul_config", matmul_config.getValue()},
                                                           {"switch_off", switch_off.getValue()},
                                                           {"filter", options.filter}}}};

  check_output_paths({{"--json", json_path}}); // before hours of measurements
  if (list_only) {
    for (const BenchCase& c : cases)
      fmt::print("{:48} {:16} {}\n", c.record.key, c.record.system,
                 c.run_self ? std::string("(its own kernels, compiled and timed in child processes)")
                            : c.config.str());
    if (!json_path.empty()) {
      header["device"] = llvm::json::Object{{"available", false}, {"why", "--list runs nothing"}};
      write_json(json_path, header, cases, cases.size());
    }
    return 0;
  }
  if (precompile)
    return run_precompile(cases);

  std::string why;
  const bool gpu = rt::driver_available(&why);
  // The compile suite alone can run without a GPU when given a target: NVRTC compiles, nothing loads.
  const bool compile_only_on_cpu = !gpu && suites == std::set<std::string>{"compile"} && !arch.empty();
  if (!gpu && !compile_only_on_cpu)
    fail("no GPU to measure on: {} (without a GPU, only `kiln_bench compile --arch sm_XY` runs)", why);
  if (gpu && !arch.empty())
    fail("--arch is for --precompile and for the compile suite on a machine with no GPU; on a GPU kiln_bench "
         "measures the device's own arch");
  header["device"] = device_json();
  if (gpu)
    fmt::print(stderr, "kiln_bench: {} cases on {} (NVRTC {})\n", cases.size(), rt::current_device().name,
               rt::nvrtc().version_string());
  else
    fmt::print(stderr, "kiln_bench: {} cases for {} without a GPU (compile only, nothing loaded; NVRTC {})\n",
               cases.size(), arch.getValue(), rt::nvrtc().version_string());
  print_suite_times(suites, nullptr, options.quick, 0);
  const auto run_start = std::chrono::steady_clock::now();

  Session session(options);
  int failures = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    CaseRecord& r = cases[i].record;
    session.run_case(cases[i]);
    failures += r.ok() ? 0 : 1;
    fmt::print(stderr, "[{}/{}] {:44} {:14} {}\n", i + 1, cases.size(), r.key, r.system, describe(r));
    if (!json_path.empty())
      write_json(json_path, header, cases, i + 1);
  }
  fmt::print(stderr, "kiln_bench: {} of {} cases ok\n", cases.size() - failures, cases.size());
  print_suite_times(suites, &cases, options.quick,
                    std::chrono::duration<double>(std::chrono::steady_clock::now() - run_start).count());
  return failures ? 1 : 0;
}

} // namespace

int main(int argc, char** argv) {
  set_self_executable(argv[0]);
  try {
    return run(argc, argv);
  } catch (const Error& e) {
    fmt::print(stderr, "kiln_bench: {}\n", e.what());
    return 2;
  } catch (const InternalError& e) {
    fmt::print(stderr, "kiln_bench: {}\n", e.what());
    return 3;
  }
}
