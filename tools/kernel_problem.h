// What `kiln tune` and `kiln model` share to run any registered kernel on synthetic data: the problem the
// command line describes (NAME=VALUE items split into the config's parameters and the sizes and scalar
// arguments), the defaults the attention kernels get, launch plans (analysis/launch_plan.h) and device buffers
// of random data laid out as a plan says.
#pragma once

#include "analysis/launch_plan.h"
#include "jit/tuned_kernel.h"

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace kiln::cli {

struct KernelProblem {
  // The kernel, copied: a problem outlives the def it was parsed from (a caller's temporary def once dangled).
  std::shared_ptr<const KernelDef> def;
  Config config;    // the kernel's default config with the parameters given
  SizeArgs sizes;   // every one of def->size_args
  ArgValues values; // the kernel's scalar arguments that were given (or defaulted, for attention)
  std::string sizes_text() const; // "M=512 N=256 K=128", in def->size_args order
};

// The NAME=VALUE items of --shape and --set in one map; a name given twice with two values is a kiln::Error.
std::map<std::string, int64_t> shape_and_set_assignments(const std::vector<std::string>& shape,
                                                         const std::vector<std::string>& sets);

// NAME=VALUE assignments (from --shape and --set) for `def`: a name among the kernel's parameters sets the
// config; a size argument or a scalar argument of the kernel is a value; anything else is a kiln::Error
// listing the names there are. Every size argument must be given ("needs --shape values for ...") and be
// from 1 to 2^31 - 1. A config's grid is checked where it is planned (plan_for), not here: the default config
// need not fit the problem when the autotuner picks another (a row tile shorter than the row). The attention
// kernels (sizes B, H, H_KV, N_Q, N_K, D) are checked as check_attention_problem checks a problem, and also
// get, unless given: dense [B, H, N, D] strides, sm_scale = 1/sqrt(D), and HEAD_DIM / EVEN_D that follow D.
KernelProblem parse_kernel_problem(const KernelDef& def, const std::map<std::string, int64_t>& assignments);

// What the autotuner chooses for `def`: the params its config space tunes (tuned_params), num_warps and
// num_stages; nothing when it has no space.
std::vector<std::string> chosen_by_tuning(const KernelDef& def);

// The launch plan of `config` for the problem (its grid from def->grid).
LaunchPlan plan_for(const KernelProblem& problem, const Config& config);
// One plan that covers every config of `configs` (those that fail to build are left out; when all fail, the
// first one's error is thrown).
LaunchPlan plan_covering(const KernelProblem& problem, const std::vector<Config>& configs);

// "  A      f16 buffer, 512 x 128 = 65536 elements (131.07 KB), read\n  stride_am = 128 (the dense ...)\n".
std::string describe_plan(const LaunchPlan& plan);

// Device buffers holding random data as the plan lays it out, the launch arguments that point into them, and
// the buffers the kernel writes (for the tuner's scratch copies). Needs a GPU.
struct DeviceInputs {
  std::vector<rt::DeviceBuffer> buffers;
  std::vector<LaunchArg> args;
  std::vector<OutputArg> outputs;
};
DeviceInputs upload_random_inputs(const LaunchPlan& plan, uint64_t seed);

// The autotuner's pick for `problem`, as `kiln tune` makes it: the candidates of tuning_candidates(def,
// problem.config) timed on random inputs (from `seed`) laid out by one plan that covers them all, outputs on
// scratch copies; `mode` says whether a remembered pick is taken instead. `describe`, when given, sees that
// plan before any GPU work. Needs a GPU.
TunedLaunch tune_problem(const KernelProblem& problem, rt::AutotuneMode mode, uint64_t seed,
                         const std::function<void(const LaunchPlan&)>& describe = {});

// Where a TunedLaunch's config came from, in words ("autotuned now", "the default config: ...").
std::string autotuned_source(rt::TuneSource source);

} // namespace kiln::cli
