// The attention backward suite ("attention_bwd"): on every shape of the forward sweep (f16/bf16, D = 64
// and 128, N = 1024 … 16384 with B·N = 16384 and H·D = 2048, causal and not), kiln's FA2 forward (keeping
// LSE) then the backward kernels kiln::attention::backward launches (preprocess, dK/dV, dQ; or the atomic
// dQ and its convert), their gradients checked against a sampled double-precision reference
// (bench/attention_bwd_reference.h) before anything is timed. Three records per shape:
//   op attention_bwd,     system kiln_fa2_bwd         deterministic backward (BackwardOptions' default),
//   op attention_bwd,     system kiln_fa2_bwd_atomic  dQ accumulated by f32 atomics in dK/dV, then cast,
//   op attention_fwd_bwd, system kiln_fa2             forward + deterministic backward, one training step.
// FLOPs: backward 2.5 × the forward's 4·B·H·N²·D (halved when causal), forward + backward 3.5 ×.
#pragma once

#include "bench/bench_session.h"

#include "kernels/attention/attention_problem.h"

#include <memory>
#include <string>
#include <vector>

namespace kiln::bench {

std::vector<BenchCase> attention_bwd_cases(const BenchOptions& options);

// The inputs, forward outputs and sampled reference of the shape last run, shared by the cases made with it.
class BwdDataCache;
std::shared_ptr<BwdDataCache> make_attention_bwd_data_cache();
// The deterministic backward (preprocess, dK/dV, dQ at default_bwd_configs, never tuned) generated with `codegen`,
// checked then timed: the ablation suite's backward workload (suite "ablation", op "attention_bwd").
BenchCase attention_bwd_ablation_case(const AttentionProblem& p, const std::string& system, const std::string& note,
                                      const CodegenOptions& codegen, const std::shared_ptr<BwdDataCache>& cache);

// ANCHORS.md's convention: the backward does 2.5 × the forward's FLOPs, a forward + backward step 3.5 ×.
double attention_bwd_flops(const AttentionProblem& p);
double attention_fwd_bwd_flops(const AttentionProblem& p);

} // namespace kiln::bench
