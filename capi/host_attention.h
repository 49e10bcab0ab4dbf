// kiln::attention's forward and backward on host memory, run by the interpreter: the same validation as the
// GPU API (validate_attention_args / validate_attention_bwd_args, so every mistake is the same kiln::Error),
// then the caller's strided tensors gathered into the kernels' dense buffers, the default configs
// interpreted, and the results scattered back into the caller's strided outputs. With options.mods the kernels
// are the mods' (their tensors' bytes copied in with the caller's strides), and options.dsink runs the sink
// gradient's kernel after the backward's. This is the path NumPy arrays take through libkiln (capi/kiln_c.h),
// so the Python package is tested where there is no GPU.
#pragma once

#include "kernels/attention/attention_bwd_api.h"

namespace kiln::capi {

// As attention::forward, with every TensorRef's data a host address.
void attention_forward_host(const attention::TensorRef& q, const attention::TensorRef& k,
                            const attention::TensorRef& v, const attention::TensorRef& o,
                            const std::optional<attention::TensorRef>& lse,
                            const attention::AttentionOptions& options);

// As attention::backward, with every TensorRef's data a host address. options.deterministic = false runs
// the atomic-dQ variant (as `kiln attention --backward --interpret` does).
void attention_backward_host(const attention::TensorRef& q, const attention::TensorRef& k,
                             const attention::TensorRef& v, const attention::TensorRef& o,
                             const attention::TensorRef& lse, const attention::TensorRef& dout,
                             const attention::TensorRef& dq, const attention::TensorRef& dk,
                             const attention::TensorRef& dv, const attention::BackwardOptions& options);

} // namespace kiln::capi
