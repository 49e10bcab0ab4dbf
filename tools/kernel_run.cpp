#include "tools/kernel_run.h"

#include "support/error.h"
#include "tools/npy_outputs.h"

#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <optional>

namespace kiln::cli {
namespace {

// The declared shape of buffer `name` for the problem's sizes, if the kernel declares one.
std::optional<std::vector<int64_t>> declared_shape(const KernelDef& def, const std::string& name,
                                                   const SizeArgs& sizes) {
  auto it = def.tensor_dims.find(name);
  if (it == def.tensor_dims.end())
    return std::nullopt;
  std::vector<int64_t> s;
  for (const std::string& d : it->second)
    s.push_back(sizes.at(d));
  return s;
}

int64_t numel_of(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

// A buffer for planned argument `a`: the file's values where one is given (checked against the declared
// shape, or against what the kernel reaches), else random data where the kernel reads it, else NaN (0 for
// integers), so that an element the kernel should write and did not fails a check. Elements past a file's are
// NaN too.
RunBuffer make_buffer(const KernelDef& def, const PlannedArg& a, const SizeArgs& sizes, const InputFile* file,
                      uint64_t buffer_seed) {
  if (a.lo < 0)
    fail(
        "kernel '{}': buffer '{}' is reached {} elements before the address passed; a run passes each buffer "
        "from its first element",
        def.name, a.name, -a.lo);
  RunBuffer b;
  b.plan = a;
  const std::optional<std::vector<int64_t>> declared = declared_shape(def, a.name, sizes);
  b.shape = declared ? *declared : std::vector<int64_t>{a.hi};
  const int64_t elements = std::max(a.hi, numel_of(b.shape));
  b.host = HostBuffer(a.dtype, elements, a.name);
  const double fill = is_float(a.dtype) ? std::numeric_limits<double>::quiet_NaN() : 0.0;
  for (int64_t i = 0; i < elements; ++i)
    b.host.set(i, fill);
  if (file) {
    const NpyArray& f = file->array;
    if (is_float(a.dtype) != f.is_float())
      fail("'{}' ({}): dtype {} ('{}') does not fit '{}', a {} buffer; expected {}", file->path, file->flag,
           f.dtype_str(), f.descr(), a.name, dtype_name(a.dtype),
           is_float(a.dtype) ? "float16, float32 or float64" : "an integer or bool array");
    if (declared && f.shape != *declared)
      fail("'{}' ({}): shape {} does not match the problem; expected {} ([{}])", file->path, file->flag,
           f.shape_str(), shape_text(*declared), fmt::join(def.tensor_dims.at(a.name), ", "));
    if (!declared && f.numel() > a.hi)
      fail("'{}' ({}): {} elements, but kernel '{}' reaches only {} of '{}' for this problem; expected at "
           "most {}",
           file->path, file->flag, f.numel(), def.name, a.hi, a.name, a.hi);
    for (int64_t i = 0; i < f.numel(); ++i) {
      const double v = f.values[static_cast<size_t>(i)];
      b.host.set(i, is_float(a.dtype) ? round_exactly_to(v, a.dtype) : v);
    }
    if (!declared)
      b.shape = f.shape;
    b.source = file->path;
  } else if (a.read) {
    const HostBuffer r = random_buffer(a, buffer_seed);
    for (int64_t i = 0; i < r.numel(); ++i)
      b.host.set(i, r.get(i));
    b.source = fmt::format("random (seed {})", buffer_seed);
  } else {
    b.source = "unset: written by the kernel";
  }
  return b;
}

// The largest |out - ref| where both are finite (0 when none is).
double max_abs_error(const std::vector<double>& out, const std::vector<double>& ref) {
  double worst = 0;
  for (size_t i = 0; i < out.size() && i < ref.size(); ++i)
    if (std::isfinite(out[i]) && std::isfinite(ref[i]))
      worst = std::max(worst, std::abs(out[i] - ref[i]));
  return worst;
}

} // namespace

std::vector<InputFile> read_input_files(const KernelDef& def, const std::vector<InputFile>& named,
                                        std::map<std::string, int64_t>& sizes) {
  std::vector<InputFile> files;
  std::map<std::string, std::string> size_from; // which file gave each size
  for (const InputFile& f : named) {
    auto dims = def.tensor_dims.find(f.name);
    InputFile in = f;
    // Rank and sizes are checked from the header, before any data is read: a file that disagrees with --shape
    // or with an earlier file is refused without reading it.
    in.array = read_npy(f.path, [&](const NpyArray& header) {
      if (dims == def.tensor_dims.end())
        return;
      if (header.shape.size() != dims->second.size())
        fail("'{}' ({}): shape {} has {} dims; expected {} ([{}])", f.path, f.flag, header.shape_str(),
             header.shape.size(), dims->second.size(), fmt::join(dims->second, ", "));
      for (size_t d = 0; d < dims->second.size(); ++d) {
        const std::string& size = dims->second[d];
        const int64_t v = header.shape[d];
        auto [it, added] = sizes.emplace(size, v);
        if (added)
          size_from[size] = f.path;
        else if (it->second != v)
          fail("'{}' ({}) has {}={} (dim {} of shape {}), but {} {}={}; expected them to agree", f.path,
               f.flag, size, v, d, header.shape_str(),
               size_from.count(size) ? "'" + size_from[size] + "' has" : std::string("--shape/--set gives"),
               size, it->second);
      }
    });
    files.push_back(std::move(in));
  }
  return files;
}

std::vector<double> RunBuffer::tensor_values() const {
  const int64_t n = numel_of(shape);
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] = host.get(i);
  return v;
}

const RunBuffer* KernelRun::buffer(const std::string& name) const {
  for (const RunBuffer& b : buffers)
    if (b.plan.name == name)
      return &b;
  return nullptr;
}

std::string KernelRun::written_names() const {
  std::vector<std::string> names;
  for (const RunBuffer& b : buffers)
    if (b.plan.written)
      names.push_back(b.plan.name);
  return names.empty() ? "none" : fmt::format("{}", fmt::join(names, ", "));
}

KernelRun prepare_kernel_run(const KernelDef& def, const std::map<std::string, int64_t>& assignments,
                             const ArgValues& scalars, const std::vector<InputFile>& files, uint64_t seed) {
  KernelRun run;
  run.problem = parse_kernel_problem(def, assignments);
  for (const auto& [name, v] : scalars)
    run.problem.values[name] = v; // plan_launch refuses a name that is no scalar argument of the kernel
  run.plan = plan_for(run.problem, run.problem.config);

  std::vector<std::string> buffer_names;
  for (const PlannedArg& a : run.plan.args)
    if (a.is_buffer())
      buffer_names.push_back(a.name);
  for (const InputFile& f : files)
    if (std::find(buffer_names.begin(), buffer_names.end(), f.name) == buffer_names.end())
      fail("{}: kernel '{}' has no buffer argument '{}'; its buffers are {}", f.flag, def.name, f.name,
           fmt::join(buffer_names, ", "));

  run.reference_inputs.sizes = run.problem.sizes;
  for (size_t i = 0; i < run.plan.args.size(); ++i) {
    const PlannedArg& a = run.plan.args[i];
    if (!a.is_buffer()) {
      run.reference_inputs.scalars[a.name] = a.value;
      continue;
    }
    const InputFile* file = nullptr;
    for (const InputFile& f : files)
      if (f.name == a.name)
        file = &f;
    run.buffers.push_back(make_buffer(def, a, run.problem.sizes, file, seed + i));
    run.reference_inputs.tensors[a.name] = run.buffers.back().tensor_values();
  }
  return run;
}

std::string choose_gpu_config(const KernelDef& def, std::map<std::string, int64_t>& assignments,
                              const ArgValues& scalars, uint64_t seed) {
  if (!def.config_space)
    return "the default config: the kernel has no config space to tune";
  for (const std::string& name : chosen_by_tuning(def))
    if (assignments.count(name))
      return fmt::format("the config as given: --set {} fixes what the autotuner would choose", name);
  KernelProblem problem = parse_kernel_problem(def, assignments);
  for (const auto& [name, v] : scalars)
    problem.values[name] = v;
  const TunedLaunch pick = tune_problem(problem, rt::autotune_mode_from_env(), seed);
  for (const auto& [name, value] : pick.config.params)
    assignments[name] = value;
  assignments["num_warps"] = pick.config.num_warps;
  assignments["num_stages"] = pick.config.num_stages;
  return autotuned_source(pick.result->source);
}

void execute_kernel_run(KernelRun& run, Executor executor) {
  const KernelDef& def = *run.problem.def;
  std::vector<InterpArg> args;
  size_t next_buffer = 0;
  for (const PlannedArg& a : run.plan.args) {
    if (a.is_buffer())
      args.push_back(InterpArg::ptr(run.buffers[next_buffer++].host));
    else
      args.push_back(a.kind == PlannedArg::Kind::Int ? InterpArg::of_int(static_cast<int64_t>(a.value))
                                                     : InterpArg::of_float(a.value));
  }
  execute(executor, def.build(run.problem.config), def.grid(run.problem.config, run.problem.sizes), args);
}

std::string OutputCheck::str() const {
  return fmt::format("{}: max abs error {:.3e}, {} (tolerance {:.1e}) {}", name, max_abs_error,
                     comparison.str(), tolerance, ok() ? "ok" : "FAIL");
}

void require_reference(const KernelDef& def) {
  if (!def.reference)
    fail("kernel '{}' registers no reference (KernelDef::reference); --check compares with one. Run without "
         "--check, or register a double-precision reference with the kernel",
         def.name);
}

std::vector<OutputCheck> check_kernel_run(const KernelRun& run) {
  const KernelDef& def = *run.problem.def;
  require_reference(def);
  const ReferenceOutputs expected = def.reference(run.reference_inputs);
  if (expected.empty())
    fail("kernel '{}': its reference returned no outputs; expected the values of the buffers it writes ({})",
         def.name, run.written_names());
  std::vector<OutputCheck> checks;
  for (const auto& [name, ref] : expected) {
    const RunBuffer* b = run.buffer(name);
    if (!b || !b->plan.written)
      fail("kernel '{}': its reference returns '{}', which the kernel does not write; expected one of {}",
           def.name, name, run.written_names());
    if (static_cast<int64_t>(ref.size()) > b->host.numel())
      fail("kernel '{}': its reference returns {} values of '{}', which holds {}", def.name, ref.size(), name,
           b->host.numel());
    std::vector<double> got(ref.size());
    for (size_t i = 0; i < ref.size(); ++i)
      got[i] = b->host.get(static_cast<int64_t>(i));
    OutputCheck c;
    c.name = name;
    c.comparison = compare_to_reference(got, ref);
    c.max_abs_error = max_abs_error(got, ref);
    c.tolerance = def.reference_tolerance > 0 ? def.reference_tolerance : tolerance(b->plan.dtype);
    checks.push_back(c);
  }
  return checks;
}

} // namespace kiln::cli
