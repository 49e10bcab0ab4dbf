// Block masks in the C ABI (kiln_c.h, version 4): the opaque kiln_block_mask a caller creates for device
// memory (attention::make_block_mask) or for the interpreter (make_host_block_mask) and names in
// kiln_attention_options.block_mask, and what the attention entry points read from that field.
#pragma once

#include "capi/kiln_c.h"
#include "kernels/attention/attention_block_mask_api.h"

#include <memory>

// The handle behind kiln_c.h's opaque type: exactly one of the two is set. Both are shared, so that a call
// holds its block mask even if another thread destroys the handle meanwhile (the caller's mistake, but not a
// use after free inside kiln).
struct kiln_block_mask {
  std::shared_ptr<const kiln::attention::BlockMask> device; // kiln_block_mask_create_cuda's
  std::shared_ptr<const kiln::HostBlockMask> host;          // kiln_block_mask_create_host's
};

namespace kiln::capi {

// The block mask of a version-4 struct for the *_cuda entry point `entry` (null when none, or when the struct
// is older): a kiln::Error naming `entry` when it was made by kiln_block_mask_create_host.
std::shared_ptr<const attention::BlockMask> cuda_block_mask(const kiln_attention_options* options,
                                                            const char* entry);
// The same for a *_host entry point: a kiln::Error when it was made by kiln_block_mask_create_cuda.
std::shared_ptr<const HostBlockMask> host_block_mask(const kiln_attention_options* options,
                                                     const char* entry);

} // namespace kiln::capi
