// kiln::attention::decode on host memory, run by the interpreter: the same validation as the GPU API
// (validate_decode_args), then what only host memory allows: the per-sequence key counts and the block
// table's entries that the sequences reach checked (a kiln::Error naming the first out of range, where the
// device path cannot look), the caller's strided q and cache gathered into the kernels' dense buffers, the
// split and combine kernels interpreted at their default configs (options.num_splits, else the heuristic's
// for kInterpreterDecodeSlots), and O and LSE scattered back. The path NumPy arrays take through
// kiln_decode_host.
#pragma once

#include "kernels/attention/decode_api.h"

namespace kiln::capi {

// As attention::decode, with every TensorRef's data (the block table's and seqlens_k's too) a host address;
// options.workspace must not be given (the interpreter's partials are its own).
void decode_host(const attention::TensorRef& q, const attention::TensorRef& k_cache,
                 const attention::TensorRef& v_cache, const attention::TensorRef& o,
                 const std::optional<attention::TensorRef>& lse, const attention::DecodeOptions& options);

} // namespace kiln::capi
