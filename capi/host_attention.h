// kiln::attention's forward and backward on host memory, run by the interpreter: the same validation as the
// GPU API (validate_attention_args / validate_attention_bwd_args, so every mistake is the same kiln::Error),
// then the caller's strided tensors gathered into the kernels' dense buffers, the default configs
// interpreted, and the results scattered back into the caller's strided outputs. With options.mods the kernels
// are the mods' (their tensors' bytes copied in with the caller's strides), and options.dsink runs the sink
// gradient's kernel after the backward's. This is the path NumPy arrays take through libkiln (capi/kiln_c.h),
// so the Python package is tested where there is no GPU.
#pragma once

#include "kernels/attention/attention_block_mask_host.h"
#include "kernels/attention/attention_bwd_api.h"

namespace kiln::capi {

// As attention::forward, with every TensorRef's data a host address. With `block_mask` (a host one; the
// options' device block_mask must be null), fa2_fwd_block_mask at its tiles: options.config when given (checked
// as the device path checks it), else block_mask_fwd_config.
void attention_forward_host(const attention::TensorRef& q, const attention::TensorRef& k,
                            const attention::TensorRef& v, const attention::TensorRef& o,
                            const std::optional<attention::TensorRef>& lse,
                            const attention::AttentionOptions& options, const HostBlockMask* block_mask = nullptr);

// As attention::backward, with every TensorRef's data a host address. options.deterministic = false runs
// the atomic-dQ variant (as `kiln attention --backward --interpret` does). With `block_mask`, dK/dV over its
// by-key lists and dQ over its forward lists at its tiles (options.config / dq_config when given, else
// block_mask_bwd_configs), always deterministic, as attention::backward over a device block mask.
void attention_backward_host(const attention::TensorRef& q, const attention::TensorRef& k,
                             const attention::TensorRef& v, const attention::TensorRef& o,
                             const attention::TensorRef& lse, const attention::TensorRef& dout,
                             const attention::TensorRef& dq, const attention::TensorRef& dk,
                             const attention::TensorRef& dv, const attention::BackwardOptions& options,
                             const HostBlockMask* block_mask = nullptr);

// The mods' tensors as the interpreter reads them: each caller's host tensor's bytes up to the last element
// the kernels read (ValidatedModTensor::end), with the caller's shape and strides.
ModTensorValues host_mod_tensors(const attention::AttentionOptions& options,
                                 const std::vector<attention::ValidatedModTensor>& validated);

} // namespace kiln::capi
