// attention_block_mask_runs: whether every list of a block mask (attention_block_mask.h) is one run of
// consecutive key tiles (or empty). Causal masks, sliding windows, prefix-LM and documents whose boundaries
// fall on tile edges give such lists; the forward over them then walks two key ranges (the full run unmasked,
// the partial run masked) that the code generator pipelines and warp-specialises as it does fa2_fwd's own
// (fa2_fwd_block_mask with BLOCK_MASK_RUNS=1). make_block_mask runs this once, after the classifier.
//
// Args: full_count, full_index, partial_count, partial_index (the block mask's lists, i32), non_runs (one
// i32, zeroed by the caller), ROWS (the count tensors' elements), K_TILES (a list's capacity). Each program
// checks BLOCK rows and adds the number of those whose full or partial list is not one run to *non_runs.
// Grid (cdiv(ROWS, BLOCK), 1, 1).
#pragma once

#include "dsl/registry.h"

namespace kiln {

Kernel build_attention_block_mask_runs(const Config& config);
const KernelDef& attention_block_mask_runs_def();

} // namespace kiln
