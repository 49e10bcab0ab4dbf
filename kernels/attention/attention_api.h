// The attention host API: FlashAttention forward (FA2, and FA1 as the baseline) over device tensors the
// caller owns, each described by an address, a dtype, a shape and strides, much as a framework's tensor is.
//
//   using namespace kiln::attention;
//   TensorRef q{q_ptr, DType::f16, {B, H, N, D}, {H * N * D, N * D, D, 1}};  // (B, H, N_Q, D) bhsd
//   ...
//   AttentionOptions opts;
//   opts.causal = Causal::BottomRight;
//   opts.stream = my_cuda_stream;                       // cudaStream_t / CUstream, not owned
//   forward(q, k, v, o, lse, opts);                      // lse may be std::nullopt
//
// Every mistake a caller can make in the description (ranks, dtypes, shapes that disagree, strides,
// alignment, sizes past the kernels' 32-bit indices, outputs overlapping inputs, ...) is found by
// validate_attention_args() before any GPU work, and reported as a kiln::Error naming what was expected, what
// came, and the caller's line. validate_attention_args() needs no GPU, so every check is tested in CI.
#pragma once

#include "dsl/config.h"
#include "dsl/dtype.h"
#include "jit/tuned_kernel.h"
#include "kernels/attention/attention_mods.h"
#include "kernels/attention/attention_problem.h"

#include <llvm/ADT/SmallVector.h>

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <source_location>
#include <string>

namespace kiln::attention {

struct BlockMask; // attention_block_mask_api.h

// A device tensor the caller owns: `data` is a device address on kiln's device (rt::current_device(), chosen
// by KILN_DEVICE), `shape` and `strides` are in elements and listed in the same order (outermost first).
// Strides may be any non-negative values (views, slices of packed QKV, transposes) except that the last
// dimension must be contiguous (stride 1).
struct TensorRef {
  uint64_t data = 0;
  DType dtype = DType::f16;
  llvm::SmallVector<int64_t, 4> shape;
  llvm::SmallVector<int64_t, 4> strides;

  // A densely packed (row-major) tensor of `shape`.
  static TensorRef contiguous(uint64_t data, DType dtype, llvm::ArrayRef<int64_t> shape);
  std::string str() const; // "f16 [2, 4, 128, 64] strides [32768, 8192, 64, 1] at 0x7f0000000000"
};

// Which keys a query sees. TopLeft is PyTorch's is_causal (key j visible to query i iff j <= i);
// BottomRight is FlashAttention >= 2.1's (iff j <= i + N_K - N_Q), the rule for decoding with a KV cache.
// The two agree when N_Q == N_K.
enum class Causal : uint8_t { None = 0, TopLeft = 1, BottomRight = 2 };

struct AttentionOptions {
  Causal causal = Causal::None;
  // Softmax scale applied to Q Kᵀ; 0 means 1 / sqrt(D). Must be finite and representable in f32.
  double sm_scale = 0;
  // Which K-load variant to run: true reads Kᵀ tiles through a transposed block pointer, false loads K tiles
  // row-major and transposes them on chip. Both compute the same result; they differ in speed.
  bool k_transposed = true;
  // f32 inputs only: run both matrix products on tensor cores in tf32 (faster, ~1e-3 relative error).
  bool tf32 = false;
  // Keys a row does not see contribute exactly nothing to it even when their V holds NaN or ±inf: the masked
  // tiles (the causal diagonal) select them away instead of multiplying them by a probability of 0, which gives
  // NaN. Off by default, as in PyTorch, FlashAttention and cuDNN: its code costs 7-18 % on every shape, finite
  // inputs included (docs/guarantees.md, "V"). Applies to forward() and backward().
  bool exact_masked_v = false;
  // A config to run instead of the autotuned/default one; it must agree with the problem (HEAD_DIM, EVEN_D,
  // CAUSAL, K_TRANSPOSED, DTYPE, TF32, EXACT_MASKED_V): start from default_fa2_config(validated.problem) and
  // change tiles.
  std::optional<Config> config;
  // How the config is picked when options.config is empty: nullopt follows KILN_AUTOTUNE; Cached never tunes (a
  // remembered pick, else the default config: what a caller capturing a CUDA graph wants), and so on
  // (rt::AutotuneMode). Applies to forward() and backward().
  std::optional<rt::AutotuneMode> autotune;
  // The stream to launch on, as an opaque CUstream / cudaStream_t (not owned); nullptr: the legacy default
  // stream. Launches are asynchronous on it unless a temporary buffer is involved (see forward()).
  void* stream = nullptr;
  // How the 4-D shapes of q, k, v and o are read: "bhsd" ([B, H, N, D], the default) or "bshd"
  // ([B, N, H, D], the layout of packed projections). Either way the strides say where elements are.
  std::string layout = "bhsd";
  // Score and mask mods (attention_mods.h; kiln's own in attention_mod_library.h), forward(), tune_forward()
  // and backward() (which must be given the forward's mods and tensors), and the device tensors they read, by
  // the names the mods declare (ModTensorSpec): each of the declared dtype, with the declared dims' extents or
  // 1 (broadcast) and any non-negative strides. The kernel is generated for the mods and tuned apart from the built-in one. Empty mods: the
  // built-in kernel, exactly.
  AttentionMods mods;
  std::map<std::string, TensorRef> mod_tensors;
  // forward(), tune_forward() and backward(): the key tiles each query tile visits (and, for the backward's
  // dK/dV, the query tiles each key tile is seen by), from make_block_mask (attention_block_mask_api.h), built
  // for this call's sizes, causal mode and mask mods. The kernels run at its tiles (options.config's, and the
  // backward's dq_config's, must be them). The forward is tuned there without a config (warp-specialised configs
  // too where its lists are all runs, BlockMask::runs); the backward is not tuned. Null: the key ranges of the
  // built-in path and the mods' key bounds.
  std::shared_ptr<const BlockMask> block_mask;
};

// A mod tensor as the kernel receives it: its address and strides (0 along a broadcast dim), in
// AttentionMods::tensors() order.
struct ValidatedModTensor {
  std::string name;        // the spec's (ModTensorSpec::name)
  std::string tensor_name; // the tensor given for it (ModTensorSpec::tensor_name())
  uint64_t data = 0;
  std::vector<int64_t> strides;
  uint64_t end = 0; // one past the last byte the kernels may read (0 for an empty problem's)
};

// What validate_attention_args() derives from a valid call: the problem for the kernels and the reference,
// the strides in elements that the kernels receive (the caller's, not attention_strides()'s), and the
// addresses.
struct ValidatedAttention {
  AttentionProblem problem; // B, H, H_KV, N_Q, N_K, D, dtype, causal, layout flag, sm_scale, variants
  AttentionStrides strides; // per tensor: batch, head and sequence strides (the head dim has stride 1)
  uint64_t q = 0, k = 0, v = 0, o = 0;
  std::optional<uint64_t> lse; // f32 [B, H, N_Q] contiguous, when the caller asked for it
  std::vector<ValidatedModTensor> mod_tensors; // options.mod_tensors, in the kernel's order
  std::vector<uint64_t> block_mask;            // options.block_mask's four tensors, when given
  // B == 0 or N_Q == 0: there is nothing to compute, and forward() returns without touching the GPU.
  bool empty = false;
};

// Checks a forward call's tensors and options without touching the GPU; a kiln::Error (ending in "(at
// file:line)", the caller's line) names the first mistake, what was expected and what came. It rejects:
//  - q, k, v, o not of rank 4; lse not of rank 3 ([B, H, N_Q]); a layout other than "bhsd"/"bshd";
//  - a dtype other than f16/bf16/f32, q/k/v/o dtypes that differ, lse not f32, tf32 without f32;
//  - batch, head dim or K/V sequence lengths that differ; H not a multiple of H_KV; o's shape != q's;
//    lse's shape != [B, H, N_Q]; a sm_scale that is NaN, infinite or too large for f32;
//  - a head dim D that is 0, above 256, or not a multiple of 8 (rows are read as 16-byte vectors);
//  - H, H_KV, D or N_K of 0 (softmax over no keys is undefined). B == 0 or N_Q == 0 is allowed and makes the
//    call a no-op (the output is empty);
//  - negative strides; a head dim that is not contiguous (stride != 1); lse not contiguous;
//  - a null address; an address or a batch/head/sequence stride not a multiple of 16 bytes (the kernels load
//    and store rows as 16-byte vectors and stage them with cp.async);
//  - sizes past the kernels' indices: B, H, H_KV, N_Q, N_K of 2^31 - 2^16 or more (rows and keys are i32, and
//    tiles step one past the end), B * H above 65535 (the grid's y dimension), tensors whose extent in bytes
//    overflows 64 bits;
//  - o whose elements overlap each other (a zero or too-small stride), and o or lse whose memory range
//    overlaps q, k, v (or each other): outputs would overwrite inputs while they are read. Ranges are
//    compared as [first byte, last byte], so an o interleaved with an input in one buffer is rejected too;
//  - options.config that disagrees with the problem (check_attention_config) or lacks a tile parameter;
//  - mods that break the rules (AttentionMods::identity; for backward(), a score mod the builder cannot
//    differentiate, AttentionMods::check_differentiable), given to an entry point other than forward(),
//    tune_forward() and backward(); a mod tensor missing, not declared, of another dtype, of a shape that is not the
//    declared dims (or 1), with a negative stride, a null or misaligned address (a multiple of its element
//    size), or whose bytes overlap o or lse;
//  - options.block_mask given to an entry point other than forward(), tune_forward() and backward(), or built
//    for other sizes, another causal mode, other mask mods or (with options.config) other tiles
//    (check_block_mask), or options.config with BLOCK_MASK_RUNS=1 over a block mask whose lists are not all runs.
ValidatedAttention validate_attention_args(const TensorRef& q, const TensorRef& k, const TensorRef& v,
                                           const TensorRef& o, const std::optional<TensorRef>& lse,
                                           const AttentionOptions& options = {},
                                           std::source_location where = std::source_location::current());

// The forward kernels' launch arguments (fa2_fwd.h, fa1_fwd.h: Q, K, V, O, LSE, sm_scale, sizes, strides) for a
// validated call writing LSE to `lse`: what forward() launches with, and what a test rebuilds a launch's tensor
// maps from (jit/tensor_map_args.h).
std::vector<LaunchArg> forward_launch_args(const ValidatedAttention& a, uint64_t lse);

// FlashAttention-2 forward: o = softmax(q kᵀ · sm_scale) v per (batch, head), with GQA/MQA when k and v have
// fewer heads than q (query head h reads kv head h / (H / H_KV)); lse, when given, receives each query row's
// natural-log logsumexp (−inf, with o = 0, for a row that sees no key; NaN with o NaN for a row whose scores hold
// NaN or +inf: docs/guarantees.md). Validates everything first (see
// validate_attention_args), then picks the config: options.config when given, else the autotuner's (as
// options.autotune, else
// KILN_AUTOTUNE says: off → default_fa2_config, cached → a remembered pick or the default, on → tuned once
// per shape bucket and remembered on disk, force → re-tuned), and launches on options.stream. Tuning runs its
// timing launches on scratch outputs, never on o and lse.
// The launch is asynchronous, except when lse is omitted: the kernel always writes an LSE, so a temporary one
// is allocated and the stream is synchronized before it is freed.
// Throws kiln::Error when no GPU driver is available (after validating). A caller that repeats one call on other
// buffers can validate and select once: ForwardPlan (attention_forward_plan.h).
void forward(const TensorRef& q, const TensorRef& k, const TensorRef& v, const TensorRef& o,
             const std::optional<TensorRef>& lse = std::nullopt, const AttentionOptions& options = {},
             std::source_location where = std::source_location::current());

// The autotuner's choice for forward() on these tensors, with its table, without the final launch: tunes
// as `mode` says (nullopt: KILN_AUTOTUNE), timing on scratch outputs. For `kiln tune` and for callers that
// want to see what was chosen and why. options.config must be empty.
TunedLaunch tune_forward(const TensorRef& q, const TensorRef& k, const TensorRef& v, const TensorRef& o,
                         const std::optional<TensorRef>& lse, const AttentionOptions& options,
                         std::optional<rt::AutotuneMode> mode,
                         std::source_location where = std::source_location::current());

// FlashAttention (v1) forward, the baseline FA2 improves on: same arguments, checks and results as forward().
// It needs f32 scratch (the running output, row sums and maxima: (HEAD_DIM + 2) · 4 bytes per query row),
// which is allocated here and freed after the stream is synchronized, so this call blocks until the kernel is
// done. The config is options.config or default_fa1_config (FA1 is a reference point, not tuned).
void fa1_forward(const TensorRef& q, const TensorRef& k, const TensorRef& v, const TensorRef& o,
                 const std::optional<TensorRef>& lse = std::nullopt, const AttentionOptions& options = {},
                 std::source_location where = std::source_location::current());

} // namespace kiln::attention
