// The split-KV decoding entry points of the C ABI (kiln_c.h, version 5): kiln::attention::decode on device
// pointers (allocating its workspace, or on the caller's), its workspace query, and capi/host_decode.h's
// interpreter path on host pointers, over one conversion of kiln_decode_options.
#include "capi/c_boundary.h"
#include "capi/host_decode.h"
#include "kernels/attention/decode_problem.h"

#include <cstring>

namespace kiln::capi {
namespace {

using attention::TensorRef;

// kiln_decode_options as attention::DecodeOptions (struct_size and enums checked; defaults when null).
attention::DecodeOptions decode_options(const kiln_decode_options* options) {
  attention::DecodeOptions o;
  if (options == nullptr)
    return o;
  check_struct_size(*options);
  // TopLeft is refused by the validation, with its reason.
  o.causal = causal_from_c(options->causal, "kiln_decode_options.causal");
  o.sm_scale = options->scale;
  o.num_splits = options->num_splits;
  o.autotune = autotune_mode(options->autotune, "kiln_decode_options.autotune");
  o.stream = options->stream;
  if (options->seqlens_k != nullptr)
    o.seqlens_k = tensor_ref(*options->seqlens_k, "kiln_decode_options.seqlens_k");
  if (options->block_table != nullptr)
    o.block_table = tensor_ref(*options->block_table, "kiln_decode_options.block_table");
  return o;
}

struct DecodeArgs {
  TensorRef q, k_cache, v_cache, o;
  std::optional<TensorRef> lse;
  attention::DecodeOptions options;
};

DecodeArgs decode_args(const kiln_tensor* q, const kiln_tensor* k_cache, const kiln_tensor* v_cache,
                       const kiln_tensor* o, const kiln_tensor* lse, const kiln_decode_options* options) {
  DecodeArgs a{tensor_ref(require(q, "q"), "q"),
               tensor_ref(require(k_cache, "k_cache"), "k_cache"),
               tensor_ref(require(v_cache, "v_cache"), "v_cache"),
               tensor_ref(require(o, "o"), "o"),
               std::nullopt,
               decode_options(options)};
  if (lse != nullptr)
    a.lse = tensor_ref(*lse, "lse");
  return a;
}

// The caller's workspace as decode() takes it: f32, rank 1, workspace_bytes / 4 elements.
TensorRef workspace_ref(void* workspace, uint64_t workspace_bytes) {
  return TensorRef::contiguous(reinterpret_cast<uint64_t>(workspace), DType::f32,
                               {static_cast<int64_t>(workspace_bytes / sizeof(float))});
}

} // namespace
} // namespace kiln::capi

using namespace kiln;
using namespace kiln::capi;

extern "C" {

void kiln_decode_options_init_sized(kiln_decode_options* options, uint32_t struct_size) {
  if (options == nullptr || !known_decode_options_size(struct_size))
    return;
  kiln_decode_options defaults{};
  defaults.struct_size = struct_size;
  defaults.causal = KILN_CAUSAL_NONE;
  defaults.autotune = KILN_AUTOTUNE_ENV;
  std::memcpy(options, &defaults, struct_size);
}

kiln_status kiln_decode_cuda(const kiln_tensor* q, const kiln_tensor* k_cache, const kiln_tensor* v_cache,
                             const kiln_tensor* o, const kiln_tensor* lse,
                             const kiln_decode_options* options) {
  return guarded([&] {
    const DecodeArgs a = decode_args(q, k_cache, v_cache, o, lse, options);
    on_gpu("kiln_decode_cuda", [&] { attention::decode(a.q, a.k_cache, a.v_cache, a.o, a.lse, a.options); });
  });
}

kiln_status kiln_decode_workspace_size(const kiln_tensor* q, const kiln_tensor* k_cache,
                                       const kiln_tensor* v_cache, const kiln_tensor* o,
                                       const kiln_tensor* lse, const kiln_decode_options* options,
                                       uint64_t* bytes, int32_t* num_splits) {
  return guarded([&] {
    require(bytes, "bytes");
    *bytes = 0;
    if (num_splits != nullptr)
      *num_splits = 0;
    const DecodeArgs a = decode_args(q, k_cache, v_cache, o, lse, options);
    const attention::ValidatedDecode v =
        attention::validate_decode_args(a.q, a.k_cache, a.v_cache, a.o, a.lse, a.options);
    int64_t splits = a.options.num_splits;
    if (!v.empty && splits == 0) { // the count decode() will choose for the current GPU
      std::string why;
      if (!rt::driver_available(&why))
        throw Unavailable(
            "kiln_decode_workspace_size with num_splits = 0 chooses the split count for the GPU, "
            "and needs one: " +
            why + " (set num_splits to size the workspace without a GPU)");
      splits = attention::decode_num_splits(v, default_decode_split_config(v.problem), 0);
    }
    const DecodeProblem& p = v.problem;
    *bytes = v.empty ? 0 : attention::decode_workspace_bytes(p.B, p.H, p.N_Q, p.D, splits);
    if (num_splits != nullptr)
      *num_splits = static_cast<int32_t>(splits);
  });
}

kiln_status kiln_decode_cuda_workspace(const kiln_tensor* q, const kiln_tensor* k_cache,
                                       const kiln_tensor* v_cache, const kiln_tensor* o,
                                       const kiln_tensor* lse, void* workspace, uint64_t workspace_bytes,
                                       const kiln_decode_options* options) {
  return guarded([&] {
    DecodeArgs a = decode_args(q, k_cache, v_cache, o, lse, options);
    a.options.workspace = workspace_ref(workspace, workspace_bytes);
    on_gpu("kiln_decode_cuda_workspace",
           [&] { attention::decode(a.q, a.k_cache, a.v_cache, a.o, a.lse, a.options); });
  });
}

kiln_status kiln_decode_host(const kiln_tensor* q, const kiln_tensor* k_cache, const kiln_tensor* v_cache,
                             const kiln_tensor* o, const kiln_tensor* lse,
                             const kiln_decode_options* options) {
  return guarded([&] {
    const DecodeArgs a = decode_args(q, k_cache, v_cache, o, lse, options);
    decode_host(a.q, a.k_cache, a.v_cache, a.o, a.lse, a.options);
  });
}

} // extern "C"
