// One run of any registered kernel on host data, as `run` makes it (tools/run_command.cpp) and as tests and
// the tutorials' programs make it without a process: the buffers the user gave as .npy files, random data
// laid out by the launch plan (analysis/launch_plan.h) for the others it reads, NaN in those it only writes;
// the run in the interpreter or on the GPU; and each output compared with the kernel's registered
// double-precision reference (KernelDef::reference, dsl/kernel_reference.h).
#pragma once

#include "kernels/compare.h"
#include "kernels/executor.h"
#include "support/npy.h"
#include "tools/kernel_problem.h"

#include <map>
#include <string>
#include <vector>

namespace kiln::cli {

// A buffer's contents from a file the user named.
struct InputFile {
  std::string name; // the kernel's buffer argument
  std::string flag; // how the user gave it ("--in x"), for messages
  std::string path;
  NpyArray array;
};

// Reads each (name, flag, path); where the kernel declares the buffer's dims (KernelDef::tensor_dims), the
// file's rank must match them, and its extents are added to `sizes` (a size two files disagree on, or that
// `sizes` holds with another value, is a kiln::Error naming both).
std::vector<InputFile> read_input_files(const KernelDef& def, const std::vector<InputFile>& named,
                                        std::map<std::string, int64_t>& sizes);

// One buffer argument of a run: its host memory (element 0 is the address passed), its tensor shape (the
// declared one, else the file's, else (the plan's extent,)) and where its contents came from.
struct RunBuffer {
  PlannedArg plan;
  HostBuffer host;
  std::vector<int64_t> shape;
  std::string source;                        // the file, "random (seed 3)" or "unset: written by the kernel"
  std::vector<double> tensor_values() const; // the first numel(shape) elements
};

struct KernelRun {
  KernelProblem problem;
  LaunchPlan plan;
  std::vector<RunBuffer> buffers;   // in parameter order
  ReferenceInputs reference_inputs; // the buffers before the run, the scalars and sizes

  const RunBuffer* buffer(const std::string& name) const; // nullptr when the kernel has none by that name
  std::string written_names() const;                      // "y, mean" or "none"
};

// The run of `def` for the NAME=VALUE `assignments` (parameters and sizes, as --shape and --set give them),
// the scalar arguments in `scalars` (the plan's defaults for the others) and `files` (each naming a buffer of
// the kernel, else a kiln::Error listing them). Buffers not given hold random data from `seed`.
KernelRun prepare_kernel_run(const KernelDef& def, const std::map<std::string, int64_t>& assignments,
                             const ArgValues& scalars, const std::vector<InputFile>& files, uint64_t seed);

// The config `run` takes on the GPU, as `kiln attention` and kiln::attention::forward take theirs: the
// autotuner's pick (tune_problem with KILN_AUTOTUNE's mode: by default a remembered pick, else tuned now on
// random inputs of the run's sizes), unless `assignments` fix num_warps, num_stages or a parameter the
// kernel's config space varies, or the kernel has no space; then the config as given. The pick's parameters
// are added to `assignments`, so that prepare_kernel_run plans the buffers for it. Returns where the config
// came from, in words.
std::string choose_gpu_config(const KernelDef& def, std::map<std::string, int64_t>& assignments,
                              const ArgValues& scalars, uint64_t seed);

// Runs it over its grid; the buffers then hold the outputs.
void execute_kernel_run(KernelRun& run, Executor executor);

struct OutputCheck {
  std::string name;
  Comparison comparison;
  double max_abs_error = 0; // over the elements where both are finite
  double tolerance = 0;     // on the relative L2 error
  bool ok() const { return comparison.ok(tolerance); }
  std::string str() const; // "y: max abs error 1.2e-03, relative error ... (tolerance 3.9e-03) ok"
};

// A kiln::Error saying how to register one when `def` has no reference.
void require_reference(const KernelDef& def);

// Each output the reference computes, compared with the run's (the kernel must register a reference).
std::vector<OutputCheck> check_kernel_run(const KernelRun& run);

} // namespace kiln::cli
