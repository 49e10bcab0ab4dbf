// A forward call made once and run many times on other buffers: what a framework's cached op wants when only
// the tensors' addresses change between calls (kiln.attention from Python, a model's layer in a loop).
//
//   using namespace kiln::attention;
//   ForwardPlan plan(q, k, v, o, lse, opts);            // validates and picks the config, as forward() does
//   for (...)
//     plan.run({q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr}, stream);   // rechecks the addresses, launches
//
// The plan runs exactly what forward() would run for tensors of the creation's dtypes, shapes and strides at
// the run's addresses: forward() validates a call (validate_attention_args), asks the tuner for the config
// and launches on forward_launch_args; a plan does the first two once and keeps the launch arguments, the
// kernel and its grid. Of what validation checks, only these depend on the addresses, and run() checks them
// again: each address non-null and 16-byte aligned (the kernels move rows as 16-byte vectors and stage them
// with cp.async; a TMA tensor map's base needs the same, and the launch decides TMA per launch anyway), each
// tensor's bytes within the 64-bit address space, and o and lse overlapping neither q, k, v nor each other.
// Everything else (dtypes, shapes, strides, their alignment, sizes, the problem's own limits) is a property
// of the creation's tensors, which the run's share by contract.
//
// The config stays the tuner's: the plan keeps the tuner's picks_version() from before its selection and
// asks again (KernelTuner::select, on the run's addresses) when the picks moved since, when a run asks for
// another autotune mode than the kept pick was made in, and on every run in force mode (which re-tunes each
// call, as forward() does). A run under CUDA-graph capture must pass rt::AutotuneMode::Cached (or Off), as a
// forward() call must: a re-selection then times nothing.
#pragma once

#include "kernels/attention/attention_api.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <source_location>

namespace kiln::attention {

// The five device addresses a plan's run reads and writes.
struct ForwardAddresses {
  uint64_t q = 0, k = 0, v = 0, o = 0, lse = 0;
};

class ForwardPlan {
public:
  // Validates the call as forward() does (every check of validate_attention_args, errors naming
  // "attention::ForwardPlan"), then, unless the problem is empty, needs the GPU and picks the config as
  // forward() does (options.config, else the tuner in options.autotune's mode, timing on scratch outputs).
  // lse is required (the kernel writes it; a plan keeps no temporary). The plain path only: options.mods,
  // options.mod_tensors and options.block_mask are refused (a kiln::Error saying to call forward()).
  // options.stream is not read: each run names its stream. Nothing is launched here.
  ForwardPlan(const TensorRef& q, const TensorRef& k, const TensorRef& v, const TensorRef& o,
              const TensorRef& lse, const AttentionOptions& options = {},
              std::source_location where = std::source_location::current());
  ~ForwardPlan();
  ForwardPlan(const ForwardPlan&) = delete;
  ForwardPlan& operator=(const ForwardPlan&) = delete;

  // Launches the forward on `at` (tensors of the creation's dtypes, shapes and strides) on `stream` (a
  // CUstream / cudaStream_t, not owned; nullptr: the legacy default stream), asynchronously. `autotune`: the
  // mode of a re-selection (see above; nullopt: KILN_AUTOTUNE). An address that is null, not 16-byte aligned,
  // or makes an output overlap an input or the other output is a kiln::Error naming the tensor ("attention::
  // ForwardPlan::run: ..."), before anything is launched. An empty problem runs (and checks) nothing. Runs of
  // one plan on several threads take turns.
  void run(const ForwardAddresses& at, void* stream = nullptr,
           std::optional<rt::AutotuneMode> autotune = std::nullopt,
           std::source_location where = std::source_location::current());

  const AttentionProblem& problem() const;
  bool empty() const;    // B = 0 or N_Q = 0: run() does nothing
  Config config() const; // the config the next run launches unless it re-selects (empty for an empty problem)

private:
  struct State;
  std::unique_ptr<State> state_;
};

} // namespace kiln::attention
