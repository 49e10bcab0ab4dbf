// kiln::attention's packed (variable-length) forward and backward on host memory, run by the interpreter: the
// same validation as the GPU API (validate_varlen_args / validate_varlen_bwd_args), the offsets read and
// checked (check_varlen_offsets: they are host memory, so always), then the caller's strided tensors gathered
// into the packed kernels' dense buffers, the default configs interpreted (with options.mods, the mods'
// kernels over the caller's mod tensors), and the results scattered back. The path NumPy arrays take through
// libkiln's kiln_attention_varlen_*_host.
#pragma once

#include "kernels/attention/attention_varlen_bwd_api.h"

namespace kiln::capi {

// As attention::forward_varlen, with every TensorRef's data (the offsets' too) a host address.
void attention_varlen_forward_host(const attention::TensorRef& q, const attention::TensorRef& k,
                                   const attention::TensorRef& v, const attention::TensorRef& o,
                                   const std::optional<attention::TensorRef>& lse,
                                   const attention::VarlenBatch& batch,
                                   const attention::AttentionOptions& options);

// As attention::backward_varlen, with every TensorRef's data a host address.
void attention_varlen_backward_host(const attention::TensorRef& q, const attention::TensorRef& k,
                                    const attention::TensorRef& v, const attention::TensorRef& o,
                                    const attention::TensorRef& lse, const attention::TensorRef& dout,
                                    const attention::TensorRef& dq, const attention::TensorRef& dk,
                                    const attention::TensorRef& dv, const attention::VarlenBatch& batch,
                                    const attention::BackwardOptions& options);

} // namespace kiln::capi
