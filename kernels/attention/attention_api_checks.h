// What the attention host API's entry points (forward, tune_forward, fa1_forward, backward) share when they
// check a caller's tensors: errors that name the entry point ("attention::backward: ...") and end in the
// caller's line, and the checks on one TensorRef (rank, extent, alignment, elements overlapping each other)
// or a pair (overlapping byte ranges). Internal to kernels/attention: the contract callers see is
// validate_attention_args() and validate_attention_bwd_args().
#pragma once

#include <optional>

#include "kernels/attention/attention_api.h"
#include "support/error.h"

#include <fmt/format.h>

#include <source_location>
#include <string>
#include <utility>

namespace kiln::attention::detail {

constexpr int64_t kMaxHeadDim = 256;
constexpr int64_t kHeadDimMultiple = 8;
constexpr uint64_t kAlignBytes = 16; // rows move as 16-byte vectors (ld/st.v4, cp.async.cg 16)

// The entry point a check runs for, and the caller's line that its errors carry.
struct ApiSite {
  const char* entry = "forward"; // messages start "attention::<entry>: "
  std::source_location where;
};

// Raises the validation error, prefixed with the entry point and ending in the caller's line.
template <typename... Args>
[[noreturn]] void reject(const ApiSite& site, fmt::format_string<Args...> f, Args&&... args) {
  fail_at(SourceLoc{site.where.file_name(), static_cast<unsigned>(site.where.line())}, "attention::{}: {}",
          site.entry, fmt::format(f, std::forward<Args>(args)...));
}

std::string dims_str(llvm::ArrayRef<int64_t> v); // "[2, 4, 64]"

// Where the sequence and head dims sit in a 4-D shape of the chosen layout, and their names for messages.
struct LayoutInfo {
  bool bshd = false;
  int seq_dim = 2, head_dim_index = 1;
  const char* names = "[B, H, N, D]";
};
LayoutInfo parse_layout(const std::string& layout, const ApiSite& site);
// A 4-D tensor's (batch, head, sequence) strides in the layout's order.
TensorStrides layout_strides(const TensorRef& t, const LayoutInfo& layout);

// Byte span of a tensor: the offset of its last element plus one element, or an error when that does not fit
// in 64 bits. Strides are non-negative and dims positive when this runs.
uint64_t extent_bytes(const char* name, const TensorRef& t, const ApiSite& site);

// Whether distinct indices of `t` always reach distinct elements.
bool elements_distinct(const TensorRef& t);

struct ByteRange {
  const char* name;
  uint64_t first, end; // [first, end)
};
bool overlaps(const ByteRange& a, const ByteRange& b);
// The `bytes` bytes at `data`, or an error when they run past the end of the 64-bit address space.
ByteRange byte_range(const char* name, uint64_t data, uint64_t bytes, const ApiSite& site);
// The bytes tensor `t` reaches from its address (extent_bytes), named `name`.
ByteRange tensor_range(const char* name, const TensorRef& t, const ApiSite& site);
// Outputs in memory of their own: each range from ranges[first_output] on overlaps none before it (inputs,
// and the outputs listed earlier), else an error naming both and why (an input overwritten while it is read,
// or two outputs written to one place).
void check_outputs_apart(llvm::ArrayRef<ByteRange> ranges, size_t first_output, const ApiSite& site);
// Whether two views of one dtype, shape and strides, `a` and `b`, share an element, decided exactly when
// each stride steps past everything the smaller ones reach (elements_distinct) and the views sit a whole
// number of elements apart: the interleaved dK and dV of a fused KV gradient ([B, N, 2, H, D] viewed twice)
// are disjoint although their byte ranges overlap. nullopt when the views are not of that kind.
std::optional<bool> same_layout_views_overlap(const TensorRef& a, const TensorRef& b);

// Rank, one stride per dim, no negative size or stride.
void check_rank(const char* name, const TensorRef& t, size_t rank, const char* names, const ApiSite& site);
// q a float dtype (f16, bf16, f32) that k, v and o share, lse f32, and options.tf32 only with f32 inputs.
void check_dtypes(const TensorRef& q, const TensorRef& k, const TensorRef& v, const TensorRef& o,
                  const std::optional<TensorRef>& lse, const AttentionOptions& options, const ApiSite& site);
// The options' part of the problem: sm_scale (a finite f32, 0 for 1/sqrt(D)), the causal mode, the K load
// variant, tf32 and exact_masked_v, with the dtype of q; a kiln::Error for a scale or mode out of range.
void apply_options(AttentionProblem& p, DType dtype, const AttentionOptions& options, const ApiSite& site);
// A size below kMaxAttentionSize (the kernels' i32 indices), checked before check_attention_problem because
// an empty problem (B or N_Q of 0) returns before that runs.
void check_size(const char* what, int64_t v, const ApiSite& site);
// A non-null, 16-byte aligned address (the kernels move rows as 16-byte vectors and stage them with cp.async;
// a TMA tensor map's base needs the same).
void check_address(const char* name, uint64_t data, const ApiSite& site);
// check_address, and batch/head/sequence strides of a multiple of 16 bytes.
void check_alignment(const char* name, const TensorRef& t, const ApiSite& site);

// The mods' tensors appended to a kernel's launch arguments: each one's address, then its strides.
void append_mod_launch_args(const std::vector<ValidatedModTensor>& tensors, std::vector<LaunchArg>& args);

// The mod tensors of `options` checked against its mods and the problem (attention_api.h lists the checks),
// in the kernel's order; `ranges` (q, k, v, o, then lse when given) for the overlap checks, nullptr for an
// empty problem, whose tensors are never read (only the mods and shapes are checked then).
std::vector<ValidatedModTensor> validate_mod_tensors(const AttentionOptions& options,
                                                     const AttentionProblem& p,
                                                     const std::vector<ByteRange>* ranges,
                                                     const ApiSite& site);
// The addresses of options.block_mask's tensors (none without one), after checking that `site`'s entry point
// takes a block mask and that it was built for `p`, options.mods and options.config's tiles
// (attention_block_mask_api.cpp).
std::vector<uint64_t> validate_block_mask(const AttentionOptions& options, const AttentionProblem& p,
                                          const ApiSite& site);
// validate_attention_args() with errors that name `site`'s entry point.
ValidatedAttention validate_attention_args(const TensorRef& q, const TensorRef& k, const TensorRef& v,
                                           const TensorRef& o, const std::optional<TensorRef>& lse,
                                           const AttentionOptions& options, const ApiSite& site);

} // namespace kiln::attention::detail
