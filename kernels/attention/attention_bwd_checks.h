// The backward entry points' shared checks (attention_bwd_api.cpp, attention_varlen_bwd_api.cpp): the
// gradients' shapes and dtypes, the variant options, the gradients' rows and memory, the f32 workspace's
// layout and memory, as attention_api_checks.h holds the forward's. Each rejects with a kiln::Error naming
// `site`.
#pragma once

#include "kernels/attention/attention_api_checks.h"
#include "kernels/attention/attention_bwd_api.h"

#include <llvm/ADT/ArrayRef.h>

namespace kiln::attention::detail {

// A gradient (or dO) and the input it must be shaped like.
struct GradientLike {
  const char* name;
  const TensorRef* t;
  const char* like_name;
  const TensorRef* like;
};
// Each of `grads` of rank `rank` (dims named `names` in messages), of `dtype` (the inputs') and of its
// input's shape.
void check_gradient_shapes(llvm::ArrayRef<GradientLike> grads, size_t rank, const char* names, DType dtype,
                           const ApiSite& site);

// ATOMIC_DQ=1 in options.config only with deterministic = false and without a dq_config.
void check_bwd_variant(const BackwardOptions& options, const ApiSite& site);

// A head dim (the last) of stride 1, then check_alignment.
void check_gradient_rows(const char* name, const TensorRef& t, const ApiSite& site);
// Distinct indices reach distinct elements: a written gradient.
void check_elements_distinct(const char* name, const TensorRef& t, const ApiSite& site);

// A tensor with its byte range.
struct TensorRange {
  ByteRange range;
  const TensorRef* t;
};
// Each of `outputs` apart from every one of `inputs` (read while it is written) and from the outputs before
// it (byte ranges, or exactly, element by element, for two views of one layout: same_layout_views_overlap).
void check_gradient_overlaps(llvm::ArrayRef<TensorRange> inputs, llvm::ArrayRef<TensorRange> outputs,
                             const ApiSite& site);

// Where Delta and the dQ accumulator lie in a backward's workspace: Delta f32 [rows] first, the accumulator
// f32 [rows, D] after it at a 256-byte boundary when `accumulate`. rows = B · H · N_Q (the packed backward's
// H · total_q: B = 1, N_Q = total_q). A kiln::Error when the sizes do not fit in 64 bits.
struct WorkspaceLayout {
  uint64_t acc_offset = 0; // 0: no accumulator
  uint64_t total = 0;
};
WorkspaceLayout workspace_layout(int64_t B, int64_t H, int64_t N_Q, int64_t D, bool accumulate,
                                 const ApiSite& site);

// The workspace holds `needed` bytes (`size_fn` names the function that says so), is 16-byte aligned and lies
// apart from every tensor of the call (`tensors`: their bytes).
void check_workspace(const BackwardWorkspace& ws, uint64_t needed, const char* size_fn,
                     const std::vector<ByteRange>& tensors, const ApiSite& site);

} // namespace kiln::attention::detail
