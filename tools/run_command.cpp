// `kiln run KERNEL`: any registered kernel on the user's .npy inputs (--in NAME=FILE) and random ones for the
// buffers not given, laid out by its launch plan (analysis/launch_plan.h), in the interpreter or on the GPU;
// with --check, its outputs compared with the double-precision reference its author registered
// (KernelDef::reference, dsl/kernel_reference.h). Sizes --shape leaves out are read off the files of tensors
// whose dims the kernel declares (KernelDef::tensor_dims). Outputs (--out NAME=FILE) are written only after
// the run and the check succeeded, as one set (tools/npy_outputs.h); their paths are checked before any work.
#include "support/error.h"
#include "tools/cli.h"
#include "tools/decimal_flag.h"
#include "tools/kernel_run.h"
#include "tools/npy_outputs.h"

namespace kiln::cli {
namespace {

namespace cl = llvm::cl;

cl::SubCommand run_sub("run", "Run a kernel on .npy (or random) inputs; --check compares with its reference");
cl::OptionCategory& cat = kiln_category();
cl::opt<std::string> kernel_name(cl::Positional, cl::Required, cl::desc("<kernel>"), cl::sub(run_sub),
                                 cl::cat(cat));
cl::list<std::string> in_files("in", cl::desc("A buffer argument's contents: NAME=FILE.npy (repeatable)"),
                               cl::value_desc("NAME=FILE.npy"), cl::sub(run_sub), cl::cat(cat));
cl::list<std::string> out_files("out",
                                cl::desc("Write a buffer the kernel writes: NAME=FILE.npy (repeatable)"),
                                cl::value_desc("NAME=FILE.npy"), cl::sub(run_sub), cl::cat(cat));
cl::list<std::string> shape("shape",
                            cl::desc("Size arguments: NAME=VALUE,... (default: read off the --in files)"),
                            cl::value_desc("NAME=V,..."), cl::sub(run_sub), cl::cat(cat));
cl::list<std::string> sets("set", cl::desc("Override a parameter (or give a size): NAME=VALUE"),
                           cl::value_desc("NAME=VALUE"), cl::sub(run_sub), cl::cat(cat));
cl::list<std::string> scalars("scalar", cl::desc("A scalar argument: NAME=VALUE, a number (e.g. eps=1e-5)"),
                              cl::value_desc("NAME=VALUE"), cl::sub(run_sub), cl::cat(cat));
cl::opt<bool> check("check", cl::desc("Compare the outputs with the kernel's registered reference"),
                    cl::sub(run_sub), cl::cat(cat));
cl::opt<bool> interpret("interpret", cl::desc("Run in the CPU interpreter (also KILN_INTERPRET=1)"),
                        cl::sub(run_sub), cl::cat(cat));
DecimalFlag<uint64_t> seed("seed", cl::desc("Seed of the random inputs (default 1)"), cl::init(1),
                           cl::sub(run_sub), cl::cat(cat));

// NAME=FILE items of `flag`.
std::vector<InputFile> parse_file_args(const std::vector<std::string>& items, const std::string& flag) {
  std::vector<InputFile> out;
  for (const std::string& item : items) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == item.size())
      fail("{} expects NAME=FILE.npy (a buffer argument of the kernel and a file), got '{}'", flag, item);
    InputFile f;
    f.name = item.substr(0, eq);
    f.flag = flag + " " + f.name;
    f.path = item.substr(eq + 1);
    for (const InputFile& g : out)
      if (g.name == f.name)
        fail("{} names '{}' twice ('{}' and '{}'); expected each buffer once", flag, f.name, g.path, f.path);
    out.push_back(f);
  }
  return out;
}

// NAME=VALUE items of --scalar, VALUE a number.
ArgValues parse_scalars(const std::vector<std::string>& items) {
  ArgValues out;
  for (const std::string& item : items) {
    llvm::SmallVector<llvm::StringRef, 4> parts;
    llvm::StringRef(item).split(parts, ',', -1, false);
    for (llvm::StringRef part : parts) {
      auto [name, value] = part.trim().split('=');
      double v = 0;
      if (name.empty() || !part.contains('=') || value.trim().getAsDouble(v))
        fail("--scalar expects NAME=VALUE with a number VALUE (e.g. --scalar eps=1e-5), got '{}'",
             part.str());
      out[name.trim().str()] = v;
    }
  }
  return out;
}

// The dtype a buffer's .npy file is written in: its own where NumPy has it, else f32 (bf16) or f64
// (integers).
DType file_dtype(DType t) {
  if (t == DType::f16 || t == DType::f32 || t == DType::f64)
    return t;
  return t == DType::bf16 ? DType::f32 : DType::f64;
}

int run_kernel(const KernelRegistry& kernels) {
  const KernelDef& def = kernels.find(kernel_name);
  const std::vector<InputFile> ins = parse_file_args(in_files, "--in");
  const std::vector<InputFile> outs = parse_file_args(out_files, "--out");
  {
    std::vector<OutputPath> outputs, inputs;
    for (const InputFile& f : outs)
      outputs.push_back({f.flag, f.path});
    for (const InputFile& f : ins)
      inputs.push_back({f.flag, f.path});
    check_output_paths(outputs, inputs);
  }
  if (check)
    require_reference(def); // before reading any file
  const Executor executor = choose_executor(interpret);

  std::map<std::string, int64_t> assignments = shape_and_set_assignments(shape, sets);
  const std::vector<InputFile> files = read_input_files(def, ins, assignments);
  const ArgValues scalar_values = parse_scalars(scalars);
  // The interpreter runs the default config: its speed says nothing.
  const std::string config_source = executor == Executor::Gpu
                                        ? choose_gpu_config(def, assignments, scalar_values, seed)
                                        : (sets.empty() ? "the default config" : "the default config with --set");
  KernelRun run = prepare_kernel_run(def, assignments, scalar_values, files, seed);
  for (const InputFile& f : outs)
    if (const RunBuffer* b = run.buffer(f.name); !b || !b->plan.written)
      fail("{}: kernel '{}' does not write a buffer '{}'; the buffers it writes are {}", f.flag, def.name,
           f.name, run.written_names());

  llvm::outs() << fmt::format("{} {} on {} ({}; {})\n", def.name, run.problem.sizes_text(),
                              executor == Executor::Gpu ? "the GPU" : "the interpreter", run.problem.config.str(),
                              config_source);
  for (const RunBuffer& b : run.buffers)
    llvm::outs() << fmt::format("  {:<12} {} {}: {}\n", b.plan.name, dtype_name(b.plan.dtype),
                                shape_text(b.shape), b.source);
  execute_kernel_run(run, executor);

  bool ok = true;
  if (check)
    for (const OutputCheck& c : check_kernel_run(run)) {
      llvm::outs() << "check " << c.str() << "\n";
      ok = ok && c.ok();
    }
  if (!ok) {
    llvm::errs() << program_name() << ": error: the result does not match the reference; no output written\n";
    return 1;
  }

  std::vector<std::pair<OutputPath, std::string>> written;
  for (const InputFile& f : outs) {
    const RunBuffer& b = *run.buffer(f.name);
    written.push_back(output_npy(f.flag, f.path, file_dtype(b.plan.dtype), b.shape, b.tensor_values()));
  }
  write_outputs(written);
  return 0;
}

} // namespace

Command run_command() { return {&run_sub, run_kernel}; }

} // namespace kiln::cli
