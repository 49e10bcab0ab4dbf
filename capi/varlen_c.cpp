// The packed (variable-length) attention entry points of the C ABI (kiln_c.h, version 5):
// kiln::attention::forward_varlen / backward_varlen / backward_varlen_with_workspace on device pointers and
// capi/host_varlen.h's interpreter path on host pointers, over one conversion of kiln_varlen_batch and of the
// attention options.
#include "capi/c_boundary.h"
#include "capi/host_varlen.h"

#include <cstring>

namespace kiln::capi {
namespace {

using attention::TensorRef;

// kiln_varlen_batch as attention::VarlenBatch (struct_size checked).
attention::VarlenBatch varlen_batch(const kiln_varlen_batch* batch) {
  const kiln_varlen_batch& b = require(batch, "batch");
  check_struct_size(b);
  attention::VarlenBatch out;
  out.cu_seqlens_q = tensor_ref(b.cu_seqlens_q, "batch.cu_seqlens_q");
  out.cu_seqlens_k = tensor_ref(b.cu_seqlens_k, "batch.cu_seqlens_k");
  out.max_seqlen_q = b.max_seqlen_q;
  out.max_seqlen_k = b.max_seqlen_k;
  out.check_offsets = b.check_offsets != 0;
  return out;
}

struct VarlenArgs {
  TensorRef q, k, v, o;
  std::optional<TensorRef> lse;
  attention::VarlenBatch batch;
  attention::BackwardOptions options;
};

// `entry` names the call in errors; `backward`: options->dsink is the backward's to refuse (with its own
// message), not a forward's mistake.
VarlenArgs varlen_args(const kiln_tensor* q, const kiln_tensor* k, const kiln_tensor* v, const kiln_tensor* o,
                       const kiln_tensor* lse, const kiln_varlen_batch* batch,
                       const kiln_attention_options* options, const char* entry, bool backward = false) {
  VarlenArgs a{tensor_ref(require(q, "q"), "q"),
               tensor_ref(require(k, "k"), "k"),
               tensor_ref(require(v, "v"), "v"),
               tensor_ref(require(o, "o"), "o"),
               std::nullopt,
               varlen_batch(batch),
               attention_options(options)};
  if (lse != nullptr)
    a.lse = tensor_ref(*lse, "lse");
  if (options != nullptr && options->struct_size > KILN_ATTENTION_OPTIONS_V3_SIZE &&
      options->block_mask != nullptr)
    fail("{}: kiln_attention_options.block_mask is set, but block masks are not built for variable-length "
         "batches yet; expected NULL",
         entry);
  if (!backward && a.options.dsink)
    fail("{}: kiln_attention_options.dsink is given to a forward call; expected NULL", entry);
  return a;
}

struct VarlenBackwardArgs {
  VarlenArgs fwd;
  TensorRef dout, dq, dk, dv;
};

VarlenBackwardArgs varlen_backward_args(const kiln_tensor* q, const kiln_tensor* k, const kiln_tensor* v,
                                        const kiln_tensor* o, const kiln_tensor* lse, const kiln_tensor* dout,
                                        const kiln_tensor* dq, const kiln_tensor* dk, const kiln_tensor* dv,
                                        const kiln_varlen_batch* batch, const kiln_attention_options* options,
                                        const char* entry) {
  require(lse, "lse (the backward needs the forward's LSE)");
  return {varlen_args(q, k, v, o, lse, batch, options, entry, /*backward=*/true),
          tensor_ref(require(dout, "dout"), "dout"), tensor_ref(require(dq, "dq"), "dq"),
          tensor_ref(require(dk, "dk"), "dk"), tensor_ref(require(dv, "dv"), "dv")};
}

} // namespace
} // namespace kiln::capi

using namespace kiln;
using namespace kiln::capi;

extern "C" {

void kiln_varlen_batch_init_sized(kiln_varlen_batch* batch, uint32_t struct_size) {
  if (batch == nullptr || !known_varlen_batch_size(struct_size))
    return;
  kiln_varlen_batch defaults{};
  defaults.struct_size = struct_size;
  defaults.cu_seqlens_q.dtype = defaults.cu_seqlens_k.dtype = KILN_I32;
  defaults.cu_seqlens_q.ndim = defaults.cu_seqlens_k.ndim = 1;
  defaults.check_offsets = 1;
  std::memcpy(batch, &defaults, struct_size);
}

kiln_status kiln_attention_varlen_forward_cuda(const kiln_tensor* q, const kiln_tensor* k,
                                               const kiln_tensor* v, const kiln_tensor* o,
                                               const kiln_tensor* lse, const kiln_varlen_batch* batch,
                                               const kiln_attention_options* options) {
  return guarded([&] {
    const VarlenArgs a = varlen_args(q, k, v, o, lse, batch, options, "kiln_attention_varlen_forward_cuda");
    on_gpu("kiln_attention_varlen_forward_cuda",
           [&] { attention::forward_varlen(a.q, a.k, a.v, a.o, a.lse, a.batch, a.options); });
  });
}

kiln_status kiln_attention_varlen_forward_host(const kiln_tensor* q, const kiln_tensor* k,
                                               const kiln_tensor* v, const kiln_tensor* o,
                                               const kiln_tensor* lse, const kiln_varlen_batch* batch,
                                               const kiln_attention_options* options) {
  return guarded([&] {
    const VarlenArgs a = varlen_args(q, k, v, o, lse, batch, options, "kiln_attention_varlen_forward_host");
    attention_varlen_forward_host(a.q, a.k, a.v, a.o, a.lse, a.batch, a.options);
  });
}

kiln_status kiln_attention_varlen_backward_cuda(const kiln_tensor* q, const kiln_tensor* k,
                                                const kiln_tensor* v, const kiln_tensor* o,
                                                const kiln_tensor* lse, const kiln_tensor* dout,
                                                const kiln_tensor* dq, const kiln_tensor* dk,
                                                const kiln_tensor* dv, const kiln_varlen_batch* batch,
                                                const kiln_attention_options* options) {
  return guarded([&] {
    const VarlenBackwardArgs a = varlen_backward_args(q, k, v, o, lse, dout, dq, dk, dv, batch, options,
                                                      "kiln_attention_varlen_backward_cuda");
    const VarlenArgs& f = a.fwd;
    on_gpu("kiln_attention_varlen_backward_cuda", [&] {
      attention::backward_varlen(f.q, f.k, f.v, f.o, *f.lse, a.dout, a.dq, a.dk, a.dv, f.batch, f.options);
    });
  });
}

kiln_status kiln_attention_varlen_backward_workspace_size(const kiln_tensor* q,
                                                          const kiln_attention_options* options,
                                                          uint64_t* bytes) {
  return guarded([&] {
    require(bytes, "bytes");
    *bytes = 0;
    *bytes = attention::varlen_backward_workspace_bytes(tensor_ref(require(q, "q"), "q"),
                                                        attention_options(options));
  });
}

kiln_status kiln_attention_varlen_backward_cuda_workspace(
    const kiln_tensor* q, const kiln_tensor* k, const kiln_tensor* v, const kiln_tensor* o,
    const kiln_tensor* lse, const kiln_tensor* dout, const kiln_tensor* dq, const kiln_tensor* dk,
    const kiln_tensor* dv, const kiln_varlen_batch* batch, void* workspace, uint64_t workspace_bytes,
    const kiln_attention_options* options) {
  return guarded([&] {
    const VarlenBackwardArgs a = varlen_backward_args(q, k, v, o, lse, dout, dq, dk, dv, batch, options,
                                                      "kiln_attention_varlen_backward_cuda_workspace");
    const VarlenArgs& f = a.fwd;
    const attention::BackwardWorkspace ws{reinterpret_cast<uint64_t>(workspace), workspace_bytes};
    on_gpu("kiln_attention_varlen_backward_cuda_workspace", [&] {
      attention::backward_varlen_with_workspace(f.q, f.k, f.v, f.o, *f.lse, a.dout, a.dq, a.dk, a.dv, f.batch,
                                                ws, f.options);
    });
  });
}

kiln_status kiln_attention_varlen_backward_host(const kiln_tensor* q, const kiln_tensor* k,
                                                const kiln_tensor* v, const kiln_tensor* o,
                                                const kiln_tensor* lse, const kiln_tensor* dout,
                                                const kiln_tensor* dq, const kiln_tensor* dk,
                                                const kiln_tensor* dv, const kiln_varlen_batch* batch,
                                                const kiln_attention_options* options) {
  return guarded([&] {
    const VarlenBackwardArgs a = varlen_backward_args(q, k, v, o, lse, dout, dq, dk, dv, batch, options,
                                                      "kiln_attention_varlen_backward_host");
    const VarlenArgs& f = a.fwd;
    attention_varlen_backward_host(f.q, f.k, f.v, f.o, *f.lse, a.dout, a.dq, a.dk, a.dv, f.batch, f.options);
  });
}

} // extern "C"
