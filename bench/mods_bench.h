// The attention-mods suite (issue 19's figures): kiln's FA2 forward generated from score and mask mods,
// beside the built-in kernel where the mod restates a built-in path (a no-op score mod, causal masking as a
// mask mod) and, through peers.py, beside PyTorch's flex_attention (torch.compile) and the SDPA backends that
// take the shape. Each case calls attention::forward() with the mods (tuned with --tune, as a user's call
// is), checks sampled rows against the double-precision reference with the same mods, then times the call.
#pragma once

#include "bench/bench_session.h"

#include <vector>

namespace kiln::bench {

std::vector<BenchCase> mods_cases(const BenchOptions& options);

} // namespace kiln::bench
