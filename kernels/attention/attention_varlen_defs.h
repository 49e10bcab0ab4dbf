// The packed (VARLEN=1) def of an attention kernel, derived from its dense def: every attention kernel that
// runs over packed sequences (fa2_fwd_varlen.h, fa2_bwd_varlen.h) is its dense kernel's builder with
// VARLEN=1, registered under a name of its own so that the dense kernel's configs, tuning results and
// generated code stay what they are.
#pragma once

#include "dsl/registry.h"

namespace kiln {

// `dense` as a packed kernel named `name`:
//  - params: the dense ones less WARP_SPECIALIZE, PINGPONG and PRODUCT_AHEAD (TMA cannot map a block pointer
//    whose shape, a sequence's length, is read from memory) and PERSISTENT (a dense grid), plus VARLEN (always
//    1);
//  - config space: the dense space less its warp-specialised configs;
//  - build: the dense build (which reads VARLEN);
//  - sizes: B (sequences), H, H_KV, TOTAL_Q, TOTAL_K, D, MAX_SEQLEN_Q, MAX_SEQLEN_K; the grid and the pruning
//  are
//    the dense kernel's with the longest sequences for N_Q and N_K; tuned per power-of-two bucket of H,
//    TOTAL_Q, MAX_SEQLEN_Q and MAX_SEQLEN_K.
// `dense` must outlive the result (the shipped defs are static).
KernelDef make_varlen_def(const KernelDef& dense, std::string name, std::string summary);

// A config of the dense kernel as one of the packed def `varlen`: the same values, VARLEN=1, without the
// params the packed kernel does not take.
Config varlen_config_of(const KernelDef& varlen, const Config& dense_config);

// The dense kernel's size args standing for a packed kernel's (N_Q, N_K: the longest sequences).
SizeArgs dense_sizes_of_varlen(const SizeArgs& s);

} // namespace kiln
