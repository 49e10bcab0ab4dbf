// Problems of any registered kernel from the command line, their launch plans and random device inputs.
#include "tools/kernel_problem.h"

#include "analysis/perf_model.h"
#include "kernels/attention/attention_problem.h"
#include "kernels/attention/attention_tiles.h"
#include "support/error.h"
#include "tools/cli.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <set>

namespace kiln::cli {

namespace {

// The largest size argument: the kernels take sizes as i32.
constexpr int64_t kMaxSize = 2147483647;

bool has(const std::vector<std::string>& names, const std::string& name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

bool is_attention_kernel(const KernelDef& def) {
  return def.size_args == std::vector<std::string>{"B", "H", "H_KV", "N_Q", "N_K", "D"};
}

std::vector<std::string> scalar_arg_names(const Kernel& k) {
  std::vector<std::string> names;
  for (const Param& p : k.params)
    if (!k.info(p.value).type.is_pointer())
      names.push_back(p.name);
  return names;
}

// Dense [B, H, N, D] tensors, the softmax scale FlashAttention uses, and a head-dim tile that fits D: what
// kiln::attention::forward would pass for contiguous bhsd inputs.
void apply_attention_defaults(KernelProblem& p, const std::map<std::string, int64_t>& given,
                              const std::vector<std::string>& scalars) {
  AttentionProblem a;
  a.B = p.sizes.at("B"), a.H = p.sizes.at("H"), a.H_KV = p.sizes.at("H_KV");
  a.N_Q = p.sizes.at("N_Q"), a.N_K = p.sizes.at("N_K"), a.D = p.sizes.at("D");
  check_attention_problem(a); // H_KV dividing H, D from 1 to 256, sizes the kernels index, B * H in the grid
  if (!given.count("HEAD_DIM") && p.config.params.count("HEAD_DIM"))
    p.config.set("HEAD_DIM", a.head_dim_tile());
  // The forward covers D = 96 or 192 with two tiles (SPLIT_D) where its own HEAD_DIM is the one it runs with.
  if (!given.count("SPLIT_D") && p.config.params.count("SPLIT_D"))
    p.config.set("SPLIT_D", !given.count("HEAD_DIM") && a.split_head_dim() ? 1 : 0);
  const bool split = p.config.get_or("SPLIT_D", 0) != 0;
  const int64_t hd = p.config.get_or("HEAD_DIM", 0), covered = head_dim_columns(hd, split);
  if (split && a.D > covered)
    fail("{}: SPLIT_D=1 covers {} columns of the head dim (HEAD_DIM={}: tiles of {} and {}), fewer than D={}; "
         "give SPLIT_D=0 or a wider HEAD_DIM",
         p.def->name, covered, hd, hd / 2, hd / 4, a.D);
  if (!given.count("EVEN_D") && p.config.params.count("EVEN_D"))
    p.config.set("EVEN_D", a.D == covered ? 1 : 0);
  const AttentionStrides s = attention_strides(a);
  for (auto [t, name] : {std::pair{&s.q, 'q'}, {&s.k, 'k'}, {&s.v, 'v'}, {&s.o, 'o'}})
    for (auto [stride, dim] : {std::pair{t->b, 'b'}, {t->h, 'h'}, {t->n, 'n'}}) {
      const std::string arg = fmt::format("stride_{}{}", name, dim);
      if (has(scalars, arg) && !p.values.count(arg))
        p.values[arg] = static_cast<double>(stride);
    }
  if (has(scalars, "sm_scale") && !p.values.count("sm_scale"))
    p.values["sm_scale"] = 1.0 / std::sqrt(static_cast<double>(std::max<int64_t>(a.D, 1)));
}

std::string join_names(const std::vector<std::string>& names) {
  return fmt::format("{}", fmt::join(names, ", "));
}

} // namespace

std::string KernelProblem::sizes_text() const {
  std::string out;
  for (const std::string& s : def->size_args)
    out += fmt::format("{}{}={}", out.empty() ? "" : " ", s, sizes.at(s));
  return out;
}

std::map<std::string, int64_t> shape_and_set_assignments(const std::vector<std::string>& shape,
                                                         const std::vector<std::string>& sets) {
  std::map<std::string, int64_t> all = parse_assignments(shape, "--shape");
  for (const auto& [name, v] : parse_assignments(sets, "--set")) {
    auto [it, inserted] = all.emplace(name, v);
    if (!inserted && it->second != v)
      fail("{} is given twice, as {} (--shape) and {} (--set)", name, it->second, v);
  }
  return all;
}

KernelProblem parse_kernel_problem(const KernelDef& def, const std::map<std::string, int64_t>& assignments) {
  if (!def.grid) // a user's KernelDef (kiln/tool_main.h) may leave it out: list and emit need none
    fail("kernel '{}' declares no launch grid (KernelDef::grid); model and tune need one to launch it",
         def.name);
  KernelProblem p;
  p.def = std::make_shared<const KernelDef>(def);
  std::map<std::string, int64_t> params;
  std::map<std::string, int64_t> values;
  // num_warps and num_stages are config entries as the kernel's own params are (KernelDef::with_overrides).
  std::vector<std::string> param_names = {"num_warps", "num_stages"};
  for (const ParamDef& d : def.params)
    param_names.push_back(d.name);
  for (const auto& [name, v] : assignments)
    (has(param_names, name) ? params : values)[name] = v;
  p.config = def.with_overrides(def.default_config(), params);

  std::vector<std::string> missing;
  for (const std::string& s : def.size_args) {
    auto it = values.find(s);
    if (it == values.end())
      missing.push_back(s);
    else if (it->second < 1 || it->second > kMaxSize)
      fail("kernel '{}': size {}={} is out of range; expected an integer from 1 to {} (the kernels take sizes as "
           "i32)",
           def.name, s, it->second, kMaxSize);
    else
      p.sizes[s] = it->second;
  }
  if (!missing.empty()) {
    std::string example;
    for (const std::string& s : def.size_args)
      example += (example.empty() ? "" : ",") + s + "=...";
    fail("kernel '{}' needs --shape values for {}; e.g. --shape {}", def.name, join_names(missing), example);
  }

  // Names that are neither parameters nor sizes must be scalar arguments of the kernel.
  const std::vector<std::string> scalars = scalar_arg_names(def.build(p.config));
  for (const auto& [name, v] : values) {
    if (!has(scalars, name) && !has(def.size_args, name))
      fail("kernel '{}' has no parameter, size or scalar argument '{}'; its parameters are {}; its sizes and "
           "scalar arguments are {}",
           def.name, name, join_names(param_names), join_names(scalars));
    if (has(scalars, name))
      p.values[name] = static_cast<double>(v);
  }
  if (is_attention_kernel(def))
    apply_attention_defaults(p, assignments, scalars);
  return p;
}

std::vector<std::string> chosen_by_tuning(const KernelDef& def) {
  if (!def.config_space)
    return {};
  std::vector<std::string> names = tuned_params(def, def.config_space());
  names.insert(names.end(), {"num_warps", "num_stages"});
  return names;
}

LaunchPlan plan_for(const KernelProblem& problem, const Config& config) {
  const KernelDef& def = *problem.def;
  const Grid grid = def.grid(config, problem.sizes);
  check_grid(def.name, grid);
  return plan_launch(def.build(config), grid, problem.values);
}

LaunchPlan plan_covering(const KernelProblem& problem, const std::vector<Config>& configs) {
  std::vector<LaunchPlan> plans;
  std::optional<Error> first_error;
  for (const Config& c : configs) {
    try {
      plans.push_back(plan_for(problem, c));
    } catch (const Error& e) {
      if (!first_error)
        first_error = e; // the tuner reports this config's failure in its table
    }
  }
  if (plans.empty()) {
    if (first_error)
      throw *first_error;
    fail("kernel '{}': no config to plan a launch for", problem.def->name);
  }
  return merge_plans(plans);
}

std::string describe_plan(const LaunchPlan& plan) {
  std::string out;
  for (const PlannedArg& a : plan.args) {
    if (a.is_buffer()) {
      std::string use = a.read && a.written ? "read and written"
                        : a.written         ? "written"
                        : a.read            ? "read"
                                            : "not accessed";
      out += fmt::format("  {:<16} {} buffer of {} elements ({}{}), {}\n", a.name, dtype_name(a.dtype),
                         a.elements(), human_bytes(static_cast<double>(a.bytes())),
                         a.lo < 0 ? fmt::format(", {} before the address passed", -a.lo) : "", use);
    } else {
      out += fmt::format("  {:<16} = {:.6g} ({})\n", a.name, a.value, a.origin);
    }
  }
  return out;
}

DeviceInputs upload_random_inputs(const LaunchPlan& plan, uint64_t seed) {
  DeviceInputs in;
  in.buffers.reserve(plan.args.size());
  for (size_t i = 0; i < plan.args.size(); ++i) {
    const PlannedArg& a = plan.args[i];
    if (a.kind == PlannedArg::Kind::Int) {
      in.args.push_back(LaunchArg::of_int(static_cast<int64_t>(a.value)));
      continue;
    }
    if (a.kind == PlannedArg::Kind::Float) {
      in.args.push_back(LaunchArg::of_float(a.value));
      continue;
    }
    // Elements below the passed address are padded to 16 bytes, so the address stays as aligned as the
    // allocation (kernels move 16-byte vectors).
    const int64_t elem = dtype_bytes(a.dtype);
    const int64_t before_bytes = (-a.lo * elem + 15) / 16 * 16;
    PlannedArg padded = a;
    padded.lo = -(before_bytes / elem);
    const HostBuffer host = random_buffer(padded, seed + i);
    in.buffers.emplace_back(host.bytes.size());
    in.buffers.back().copy_from_host(host.bytes.data(), host.bytes.size());
    in.args.push_back(LaunchArg::pointer(in.buffers.back().ptr() + static_cast<uint64_t>(before_bytes)));
    if (a.written)
      in.outputs.push_back(OutputArg{i, static_cast<size_t>(a.hi * elem), static_cast<size_t>(before_bytes)});
  }
  return in;
}

TunedLaunch tune_problem(const KernelProblem& problem, rt::AutotuneMode mode, uint64_t seed,
                         const std::function<void(const LaunchPlan&)>& describe) {
  const KernelDef& def = *problem.def;
  const std::vector<Config> candidates = tuning_candidates(def, problem.config);
  // Buffers large enough for every candidate: tiles decide how far past the sizes a masked access reaches.
  const LaunchPlan plan = plan_covering(problem, candidates);
  require_gpu("autotuning times every candidate on the GPU");
  if (describe)
    describe(plan);

  // TFLOP/s where the kernel multiplies matrices (FLOPs of its dots, from the performance model); else GB/s
  // over the bytes its buffers hold (each read or written once).
  TuneOptions options;
  options.mode = mode;
  // The cost of the first candidate that plans (the default config need not: a row tile shorter than the
  // row is a config the tuner replaces); candidates differ in how they move the bytes, not in the FLOPs.
  ScalarArgs scalars(problem.values.begin(), problem.values.end());
  CostEstimate cost;
  for (const Config& c : candidates) {
    try {
      const Grid grid = def.grid(c, problem.sizes);
      check_grid(def.name, grid);
      cost = estimate_cost(def.build(c), grid, scalars);
      break;
    } catch (const Error&) {
    }
  }
  if (cost.total.matrix_flops > 0)
    options.flops = cost.total.matrix_flops;
  else
    options.bytes = static_cast<double>(plan.bytes_read() + plan.bytes_written());

  DeviceInputs inputs = upload_random_inputs(plan, seed);
  KernelTuner tuner;
  return tuner.select(def, problem.config, problem.sizes, inputs.args, inputs.outputs, options);
}

std::string autotuned_source(rt::TuneSource source) {
  switch (source) {
  case rt::TuneSource::Tuned:
    return "autotuned now";
  case rt::TuneSource::Memory:
  case rt::TuneSource::Disk:
    return "autotuned, remembered in the tuning cache";
  case rt::TuneSource::Default:
    break;
  }
  return fmt::format(
      "the default config: KILN_AUTOTUNE={}{}", rt::autotune_mode_name(rt::autotune_mode_from_env()),
      rt::autotune_mode_from_env() == rt::AutotuneMode::Cached ? " and nothing remembered" : "");
}

} // namespace kiln::cli
