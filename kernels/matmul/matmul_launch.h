// C = A @ B on device memory the caller owns: the one-kernel matmul at the tuner's pick, or split-K
// (kernels/matmul/matmul_split_k.h: two kernels and an f32 workspace) where the output has too few tiles to
// fill the GPU and the tuner timed split-K faster. A plan is made once per problem and launched many times.
#pragma once

#include "jit/tuned_kernel.h"
#include "kernels/matmul/matmul.h"

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace kiln {

struct MatmulPointers {
  uint64_t a = 0, b = 0, c = 0; // device addresses
};

// One kernel launch of a plan.
struct MatmulStep {
  std::string kernel_name;
  Config config;
  std::shared_ptr<JitKernel> kernel;
  Grid grid;
  std::vector<LaunchArg> args;
  std::optional<double> ms; // the tuner's time for it, when it has one
};

struct MatmulPlan {
  std::vector<MatmulStep> steps;               // launched in order on one stream
  std::shared_ptr<rt::DeviceBuffer> workspace; // split-K's f32 partials; null for one kernel

  void launch(const rt::Stream& stream = rt::Stream()) const;
  // "matmul BLOCK_M=128 ..." or "split-K: matmul_split_k <config> + matmul_split_k_reduce <config>".
  std::string str() const;
};

// Whether split-K is worth tuning for `p` on a GPU of `sm_count` SMs: the output has fewer 128 x 128 tiles
// than there are SMs (a one-kernel product leaves SMs idle) and K spans at least 16 tiles of 64 (enough
// reduction to cut). The f32 workspace (4 splits at most) must also stay within 32-bit row indices.
bool split_k_worth_tuning(const MatmulProblem& p, int sm_count);

// The configs split-K starts its tuning from for `p` (the problem's dtype and layouts set).
Config default_split_k_config(const MatmulProblem& p);
Config default_split_k_reduce_config(const MatmulProblem& p, int64_t split_k);

struct MatmulPlanOptions {
  TuneOptions tune;
  bool allow_split_k = true;
};

// The plan for C = A @ B with these strides at these addresses: the tuner selects matmul's config (tuning on
// a miss, on scratch copies of C) and, where split_k_worth_tuning(), the split-K pair's; split-K is chosen when
// both were timed and the pair's times add up to less. Without times (KILN_AUTOTUNE=off, or cached with
// nothing remembered) the one kernel runs.
MatmulPlan plan_matmul(KernelTuner& tuner, const MatmulProblem& p, const MatmulStrides& strides,
                       const MatmulPointers& ptrs, const MatmulPlanOptions& options = {});

// The launch arguments of each kernel, in its parameter order (matmul.h, matmul_split_k.h).
std::vector<LaunchArg> matmul_args(const MatmulProblem& p, const MatmulStrides& s, const MatmulPointers& ptrs);
std::vector<LaunchArg> matmul_split_k_args(const MatmulProblem& p, const MatmulStrides& s,
                                           const MatmulPointers& ptrs, uint64_t workspace);
std::vector<LaunchArg> matmul_split_k_reduce_args(const MatmulProblem& p, const MatmulStrides& s,
                                                  const MatmulPointers& ptrs, uint64_t workspace);

} // namespace kiln
