/* kiln's C ABI: the stable surface of libkiln.so that other languages (Python's ctypes, Rust, Julia, a
 * framework's extension) call. Plain C types only; no C++ exception, abort or exit crosses it.
 *
 *   kiln_tensor q = {ptr, KILN_F16, 4, {B, H, N, D}, {H * N * D, N * D, D, 1}};   // bhsd, dense
 *   kiln_attention_options opts;
 *   kiln_attention_options_init(&opts);
 *   opts.causal = KILN_CAUSAL_BOTTOM_RIGHT;
 *   opts.stream = my_stream;                                // cudaStream_t / CUstream, not owned
 *   if (kiln_attention_forward_cuda(&q, &k, &v, &o, &lse, &opts) != KILN_OK)
 *     fprintf(stderr, "%s\n", kiln_last_error());           // kiln::Error's full message
 *
 * Every function that can fail returns a kiln_status; on failure kiln_last_error() holds the message (per
 * thread, until the next call on that thread). Strings returned through `const char**` live in per-thread
 * storage until the next call on the same thread that returns one: copy them before calling again.
 *
 * Compatibility: functions are only ever added; a struct that may grow starts with `struct_size`, which the
 * caller sets (the *_init functions do), so an older caller's smaller struct still reads correctly.
 * KILN_C_ABI_VERSION grows with each addition (kiln_abi_version() says which the library has). */
#ifndef KILN_C_H
#define KILN_C_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define KILN_C_EXPORT __attribute__((visibility("default")))
#else
#define KILN_C_EXPORT
#endif

#define KILN_C_ABI_VERSION 6
#define KILN_MAX_DIMS 8

typedef enum kiln_status {
  KILN_OK = 0,
  KILN_ERROR = 1,                  /* a caller's mistake (kiln::Error): shapes, dtypes, names, options, files */
  KILN_ERROR_INVALID_ARGUMENT = 2, /* the C call itself is malformed: a null pointer, an unknown enum value,
                                      a struct_size this library does not know, ndim out of range */
  KILN_ERROR_UNAVAILABLE = 3,      /* the call needs a GPU (CUDA driver, device, NVRTC) that is not here */
  KILN_ERROR_OUT_OF_MEMORY = 4,    /* host memory ran out */
  KILN_ERROR_INTERNAL = 5,         /* a bug in kiln (kiln::InternalError) */
  KILN_ERROR_UNKNOWN = 6           /* any other failure */
} kiln_status;

/* Element types; the values are part of the ABI. */
typedef enum kiln_dtype {
  KILN_I1 = 1,
  KILN_U8 = 2,
  KILN_I32 = 3,
  KILN_I64 = 4,
  KILN_F16 = 5,
  KILN_BF16 = 6,
  KILN_F32 = 7,
  KILN_F64 = 8
} kiln_dtype;

/* A strided tensor the caller owns: host memory for the *_host calls, device memory on kiln's device
 * (KILN_DEVICE) for the *_cuda calls. Shape and strides are in elements, outermost first; entries past
 * ndim are ignored. */
typedef struct kiln_tensor {
  void* data;
  int32_t dtype; /* kiln_dtype */
  int32_t ndim;  /* 0..KILN_MAX_DIMS */
  int64_t shape[KILN_MAX_DIMS];
  int64_t strides[KILN_MAX_DIMS];
} kiln_tensor;

typedef enum kiln_causal {
  KILN_CAUSAL_NONE = 0,
  KILN_CAUSAL_TOP_LEFT = 1,    /* key j visible to query i iff j <= i (PyTorch's is_causal) */
  KILN_CAUSAL_BOTTOM_RIGHT = 2 /* iff j <= i + N_K - N_Q (FlashAttention >= 2.1, KV-cache decoding) */
} kiln_causal;

typedef enum kiln_layout {
  KILN_LAYOUT_BHSD = 0, /* q, k, v, o shaped [B, H, N, D] */
  KILN_LAYOUT_BSHD = 1  /* [B, N, H, D] */
} kiln_layout;

/* How a *_cuda call picks its kernels' configs (KILN_AUTOTUNE's modes). */
typedef enum kiln_autotune {
  KILN_AUTOTUNE_ENV = 0,    /* as the KILN_AUTOTUNE environment variable says (on when unset) */
  KILN_AUTOTUNE_OFF = 1,    /* the default configs */
  KILN_AUTOTUNE_CACHED = 2, /* a remembered pick, else the default; never times anything (CUDA-graph capture) */
  KILN_AUTOTUNE_ON = 3,     /* a remembered pick, else tune now and remember */
  KILN_AUTOTUNE_FORCE = 4   /* tune now even when a pick is remembered */
} kiln_autotune;

/* A tensor a mod reads, by the name the mod gives it ("alibi_slopes", "q_doc", "kv_doc", "bias", "sinks"). */
typedef struct kiln_mod_tensor {
  const char* name;
  kiln_tensor tensor;
} kiln_mod_tensor;

/* A block mask (kiln_block_mask_create_cuda / _host, below): per query tile, the key tiles the mask shows fully
 * and those it shows partly, computed once from the mask mods and reused by the calls that name it in
 * kiln_attention_options.block_mask. Opaque; owned by the caller, freed by kiln_block_mask_destroy. */
typedef struct kiln_block_mask kiln_block_mask;

typedef struct kiln_attention_options {
  uint32_t struct_size; /* sizeof(kiln_attention_options) */
  int32_t causal;       /* kiln_causal */
  int32_t layout;       /* kiln_layout */
  int32_t deterministic; /* backward: 1 (default) bitwise-reproducible, 0 lets the tuner pick atomic dQ */
  int32_t tf32;          /* f32 inputs: tensor cores in tf32 (GPU) */
  double scale;           /* softmax scale; 0: 1/sqrt(D) */
  void* stream;           /* *_cuda: the cudaStream_t / CUstream to launch on (not owned); NULL: legacy default */
  /* ---- ABI version 2 (a version-1 caller's struct_size ends before here; these then take their defaults) */
  int32_t exact_masked_v; /* 1: keys a row does not see add nothing even when their V is NaN/inf (7-18 % slower) */
  int32_t autotune;       /* kiln_autotune; KILN_AUTOTUNE_ENV (0) by default */
  /* ---- ABI version 3 (an older caller's struct ends before here: no mods, no dsink) */
  /* Library score/mask/sink mods (kernels/attention/attention_mod_spec.h), ';'-separated, each NAME[=ARGS]:
   * "causal[=top-left|bottom-right]", "sliding_window=LEFT[,RIGHT]", "prefix_lm=N", "softcap=CAP", "alibi",
   * "document", "bias[=f32|f16|bf16]", "sinks"; e.g. "sliding_window=128,0;softcap=30". NULL or "": none.
   * The backward must be given the forward's mods and tensors. Copied during the call, not kept. */
  const char* mods;
  /* The tensors the mods read (num_mod_tensors of them; NULL when 0), each the mod's dtype with the dims it
   * declares ([H] for "alibi_slopes" and "sinks", [B, N_Q] / [B, N_K] i32 for "q_doc" / "kv_doc",
   * [B, H, N_Q, N_K] for "bias"), any of them 1 (broadcast), any non-negative strides; host memory for the
   * *_host calls, device memory for the *_cuda ones. */
  const kiln_mod_tensor* mod_tensors;
  int32_t num_mod_tensors;
  /* Backward with the "sinks" mod: where to write d loss / d sinks, f32, dense: [H] (the "sinks" tensor's
   * gradient) or [B, H, N_Q] (each row's). NULL: not computed. An error on the forward entry points. */
  const kiln_tensor* dsink;
  /* ---- ABI version 4 (an older caller's struct ends before here: no block mask) */
  /* The key tiles each query tile visits (forward, dQ) and the query tiles each key tile is seen by (dK/dV),
   * from kiln_block_mask_create_cuda for the *_cuda calls or kiln_block_mask_create_host for the *_host ones
   * (the other kind is a KILN_ERROR), built for this call's B, H, H_KV, N_Q, N_K, causal mode and mask mods
   * (options->mods must hold the same mask mods; score mods and sinks may be added; their tensors are the
   * caller's to keep equal to those the block mask was built from). The kernels run at its tiles and are not
   * autotuned by the backward; the backward is always deterministic. NULL: none. Not owned, not kept. */
  const kiln_block_mask* block_mask;
} kiln_attention_options;
/* struct_size of the version-1 struct (up to and including `stream`), which this library still accepts. */
#define KILN_ATTENTION_OPTIONS_V1_SIZE (offsetof(kiln_attention_options, exact_masked_v))
/* struct_size of the version-2 struct (up to and including `autotune`), which this library still accepts. */
#define KILN_ATTENTION_OPTIONS_V2_SIZE (offsetof(kiln_attention_options, mods))
/* struct_size of the version-3 struct (up to and including `dsink`), which this library still accepts. */
#define KILN_ATTENTION_OPTIONS_V3_SIZE (offsetof(kiln_attention_options, block_mask))

/* A scalar argument of a kernel, by parameter name (a size argument of its grid rule too). */
typedef struct kiln_scalar {
  const char* name;
  int32_t is_float; /* 0: `i` holds the value, 1: `f` does */
  int64_t i;
  double f;
} kiln_scalar;

/* A config parameter override NAME=VALUE (num_warps and num_stages included). */
typedef struct kiln_param {
  const char* name;
  int64_t value;
} kiln_param;

/* ---- library ---- */
KILN_C_EXPORT const char* kiln_version(void);  /* "0.1.0" */
KILN_C_EXPORT int32_t kiln_abi_version(void); /* KILN_C_ABI_VERSION of the library */
/* The message of the last failed call on this thread ("" when the last call succeeded). */
KILN_C_EXPORT const char* kiln_last_error(void);
KILN_C_EXPORT const char* kiln_status_name(int32_t status); /* "KILN_ERROR_UNAVAILABLE" */
/* The defaults in the first `struct_size` bytes of *options, struct_size set: sizeof(kiln_attention_options)
 * of the caller's header (KILN_ATTENTION_OPTIONS_V1_SIZE, _V2_SIZE, _V3_SIZE or the current size;
 * any other size leaves *options untouched). It writes no byte past struct_size, so a caller built against an
 * older header is safe. */
KILN_C_EXPORT void kiln_attention_options_init_sized(kiln_attention_options* options, uint32_t struct_size);
/* ABI version 1's initializer, kept for binaries built against it: the version-1 part only. The macro below
 * sends a caller compiled against this header to kiln_attention_options_init_sized with its own size. */
KILN_C_EXPORT void kiln_attention_options_init(kiln_attention_options* options);
#define kiln_attention_options_init(options) \
  kiln_attention_options_init_sized((options), (uint32_t)sizeof(kiln_attention_options))

/* ---- device and caches ---- */
/* The number of CUDA devices; 0 (and KILN_OK) where there is no driver or no device, with the reason in
 * *why_not (may be NULL). */
KILN_C_EXPORT kiln_status kiln_device_count(int32_t* count, const char** why_not);
/* A JSON object describing device `ordinal` (name, arch, sm_count, shared memory, ...). */
KILN_C_EXPORT kiln_status kiln_device_info(int32_t ordinal, const char** json);
/* Whether kernels can run on a GPU here (driver, device, NVRTC, KILN_INTERPRET not set): 1 or 0. */
KILN_C_EXPORT int32_t kiln_gpu_available(const char** why_not);
/* The cache root and its compile/ and tune/ folders as JSON {"root", "compile", "tune"}. */
KILN_C_EXPORT kiln_status kiln_cache_path(const char** json);
/* Removes every compile-cache file and autotune result; *removed (may be NULL) counts them. */
KILN_C_EXPORT kiln_status kiln_cache_clear(int64_t* removed);

/* ---- attention: FlashAttention-2 through kiln::attention ----
 * q [B, H, N_Q, D], k and v [B, H_KV, N_K, D], o like q (bshd: [B, N, H, D]); lse f32 [B, H, N_Q] or NULL
 * (forward) / required (backward). Every check of kiln::attention::validate_attention_args applies. */
KILN_C_EXPORT kiln_status kiln_attention_forward_cuda(const kiln_tensor* q, const kiln_tensor* k,
                                                      const kiln_tensor* v, const kiln_tensor* o,
                                                      const kiln_tensor* lse, const kiln_attention_options* options);
KILN_C_EXPORT kiln_status kiln_attention_backward_cuda(const kiln_tensor* q, const kiln_tensor* k,
                                                       const kiln_tensor* v, const kiln_tensor* o,
                                                       const kiln_tensor* lse, const kiln_tensor* dout,
                                                       const kiln_tensor* dq, const kiln_tensor* dk,
                                                       const kiln_tensor* dv, const kiln_attention_options* options);
/* The backward's f32 scratch in memory the caller provides, so that the call can be captured in a CUDA graph:
 * *bytes is what kiln_attention_backward_cuda_workspace needs for q's problem (its B, H, N_Q, D in
 * options->layout) under `options` (deterministic, ...); only q's ndim and shape are read (data may be NULL).
 * Needs no GPU. */
KILN_C_EXPORT kiln_status kiln_attention_backward_workspace_size(const kiln_tensor* q,
                                                                 const kiln_attention_options* options,
                                                                 uint64_t* bytes);
/* kiln_attention_backward_cuda on `workspace` (device memory, 16-byte aligned, workspace_bytes of it, at least
 * kiln_attention_backward_workspace_size's): enqueues the kernels on options->stream and returns without
 * synchronizing; the workspace must stay untouched until they are done. Once the kernels are compiled and
 * their configs picked (options->autotune = KILN_AUTOTUNE_CACHED never times anything), the call neither
 * allocates nor synchronizes, so it can be captured. kiln_attention_backward_cuda allocates the scratch itself
 * and synchronizes the stream before returning. */
KILN_C_EXPORT kiln_status kiln_attention_backward_cuda_workspace(
    const kiln_tensor* q, const kiln_tensor* k, const kiln_tensor* v, const kiln_tensor* o, const kiln_tensor* lse,
    const kiln_tensor* dout, const kiln_tensor* dq, const kiln_tensor* dk, const kiln_tensor* dv, void* workspace,
    uint64_t workspace_bytes, const kiln_attention_options* options);
/* The same on host memory, run by kiln's interpreter (the GPU's numeric rules, default configs). */
KILN_C_EXPORT kiln_status kiln_attention_forward_host(const kiln_tensor* q, const kiln_tensor* k,
                                                      const kiln_tensor* v, const kiln_tensor* o,
                                                      const kiln_tensor* lse, const kiln_attention_options* options);
KILN_C_EXPORT kiln_status kiln_attention_backward_host(const kiln_tensor* q, const kiln_tensor* k,
                                                       const kiln_tensor* v, const kiln_tensor* o,
                                                       const kiln_tensor* lse, const kiln_tensor* dout,
                                                       const kiln_tensor* dq, const kiln_tensor* dk,
                                                       const kiln_tensor* dv, const kiln_attention_options* options);

/* ---- forward plans (ABI version 6): one forward made once, run many times on other memory ----
 * kiln_attention_forward_plan checks a forward call as kiln_attention_forward_cuda does (every check of
 * kiln::attention::validate_attention_args; q, k, v, o and lse describe tensors of the dtypes, shapes and strides
 * the runs will have, at addresses that pass the checks) and picks its config as that call does (the autotuner
 * in options->autotune's mode), but launches nothing (options->stream is not read). lse is required (KILN_ERROR_INVALID_ARGUMENT when NULL); options->mods, mod_tensors and block_mask must
 * be unset (KILN_ERROR otherwise: call kiln_attention_forward_cuda for those). On success *plan is a new plan,
 * freed by kiln_attention_plan_destroy; on failure NULL. KILN_ERROR_UNAVAILABLE where there is no GPU, after
 * checking the arguments (a plan of an empty problem, B = 0 or N_Q = 0, needs none and runs nothing).
 *   kiln_attention_plan* plan;
 *   kiln_attention_forward_plan(&q, &k, &v, &o, &lse, &opts, &plan);
 *   for (...)   // tensors of q..lse's dtypes, shapes and strides, anywhere in device memory
 *     kiln_attention_plan_forward(plan, q_ptr, k_ptr, v_ptr, o_ptr, lse_ptr, stream, KILN_AUTOTUNE_ENV);
 *   kiln_attention_plan_destroy(plan);
 * kiln_attention_plan_forward launches the plan's forward on these device addresses on `stream` (a cudaStream_t /
 * CUstream, not owned; NULL: the legacy default stream), asynchronously, as kiln_attention_forward_cuda would on
 * tensors described as at creation but at these addresses. Of that call's checks only those that depend on the
 * addresses are made again: each address non-null and 16-byte aligned, each tensor's bytes within the address
 * space, o and lse overlapping neither q, k, v nor each other (KILN_ERROR naming the tensor, nothing launched).
 * The config is the one the plan picked until the autotuner's remembered picks change, `autotune` (kiln_autotune)
 * differs from the mode the pick was made in, or it is KILN_AUTOTUNE_FORCE: the run then picks again, as a
 * kiln_attention_forward_cuda call in that mode would (under CUDA-graph capture pass KILN_AUTOTUNE_CACHED, which
 * times nothing). Runs of one plan from several threads take turns. A plan owns no device memory that its
 * launches read, so kiln_attention_plan_destroy (NULL: nothing) may run while they are queued. */
typedef struct kiln_attention_plan kiln_attention_plan;
KILN_C_EXPORT kiln_status kiln_attention_forward_plan(const kiln_tensor* q, const kiln_tensor* k,
                                                      const kiln_tensor* v, const kiln_tensor* o,
                                                      const kiln_tensor* lse, const kiln_attention_options* options,
                                                      kiln_attention_plan** plan);
KILN_C_EXPORT kiln_status kiln_attention_plan_forward(kiln_attention_plan* plan, const void* q, const void* k,
                                                      const void* v, void* o, void* lse, void* stream,
                                                      int32_t autotune);
KILN_C_EXPORT void kiln_attention_plan_destroy(kiln_attention_plan* plan);

/* ---- block masks (ABI version 4) ----
 * A block mask for attention calls of B batches, H query heads, H_KV kv heads, N_Q queries and N_K keys (each
 * at least 1, H a multiple of H_KV) at tiles block_m x block_n (powers of two in [16, 256]; the forward and
 * the backward then run at these tiles): `options` says the mask, its causal mode and its mods (only the
 * mask mods matter: "causal", "sliding_window", "prefix_lm", "document"; score mods and sinks are ignored)
 * with the tensors they read (mod_tensors: "q_doc", "kv_doc"); its other fields are not read, and its
 * block_mask must be NULL. On success *block_mask is a new block mask, which the caller frees with
 * kiln_block_mask_destroy; on failure NULL.
 *   kiln_block_mask* bm;
 *   opts.mods = "document;sliding_window=256,0";  opts.mod_tensors = docs;  opts.num_mod_tensors = 2;
 *   kiln_block_mask_create_cuda(B, H, H_KV, N, N, 128, 64, &opts, &bm);
 *   opts.block_mask = bm;                             // for every forward/backward of these sizes and mask
 *   kiln_attention_forward_cuda(&q, &k, &v, &o, &lse, &opts);
 *   kiln_block_mask_destroy(bm);                      // after the calls that use it are done
 * _cuda: evaluated by kiln's classifier kernels on the GPU (mod tensors in device memory), on options->stream,
 * which it synchronizes once (to read whether every list is a run). A later call on another stream must wait
 * for that stream. KILN_ERROR_UNAVAILABLE where there is no GPU, after checking the arguments.
 * _host: the same kernels in kiln's interpreter, mod tensors in host memory; for the *_host calls. */
KILN_C_EXPORT kiln_status kiln_block_mask_create_cuda(int64_t B, int64_t H, int64_t H_KV, int64_t N_Q, int64_t N_K,
                                                      int64_t block_m, int64_t block_n,
                                                      const kiln_attention_options* options,
                                                      kiln_block_mask** block_mask);
KILN_C_EXPORT kiln_status kiln_block_mask_create_host(int64_t B, int64_t H, int64_t H_KV, int64_t N_Q, int64_t N_K,
                                                      int64_t block_m, int64_t block_n,
                                                      const kiln_attention_options* options,
                                                      kiln_block_mask** block_mask);
/* Frees a block mask (NULL: nothing). Its device memory is freed at once: the calls that use it must be done
 * (the stream they ran on synchronized); calls that named it and returned keep no reference to it. */
KILN_C_EXPORT void kiln_block_mask_destroy(kiln_block_mask* block_mask);
/* What a block mask was built for, as JSON {"memory": "cuda" | "host", "B", "H", "H_KV", "N_Q", "N_K",
 * "block_m", "block_n", "causal": "none" | "top-left" | "bottom-right", "mask_mods" (their names, e.g.
 * "document,sliding_window(256,0)"; "" for none), "runs" (true when every list is one run of consecutive tiles
 * or empty: the forward then runs its two-range kernel, which may be warp-specialised)}. */
KILN_C_EXPORT kiln_status kiln_block_mask_info(const kiln_block_mask* block_mask, const char** json);

/* ---- variable-length (packed) attention (ABI version 5): FlashAttention's flash_attn_varlen_func ----
 * B sequences packed along one token dim: q and o [total_q, H, D], k and v [total_k, H_KV, D] (the head dim
 * contiguous), sequence b being rows cu_seqlens_q[b] .. cu_seqlens_q[b + 1] of q against keys cu_seqlens_k[b]
 * .. cu_seqlens_k[b + 1] of k and v, each its own attention problem (lengths may be 0; a row that sees no key
 * gets O = 0 and LSE = -inf). lse is f32 [H, total_q] (FlashAttention's varlen layout). Causal masks align
 * per sequence, positions within it. kiln_attention_options as for dense attention, except: layout must stay
 * KILN_LAYOUT_BHSD (packed tensors have one layout), block_mask must be NULL (not built for packed batches),
 * dsink must be NULL (the sink's gradient is not built for them). Mods apply per sequence, as to one batch of
 * the dense call: b is the sequence, q_idx and kv_idx positions within it, and a mod tensor's B, N_Q, N_K
 * dims are B (sequences), max_seqlen_q, max_seqlen_k (or 1): document ids [B, max_seqlen_q], a bias [B, H,
 * max_seqlen_q, max_seqlen_k]. Every check of kiln::attention::validate_varlen_args applies. */
typedef struct kiln_varlen_batch {
  uint32_t struct_size;     /* sizeof(kiln_varlen_batch); kiln_varlen_batch_init sets it */
  kiln_tensor cu_seqlens_q; /* i32 [B + 1], contiguous, from 0 to total_q (device memory for *_cuda) */
  kiln_tensor cu_seqlens_k; /* i32 [B + 1], contiguous, from 0 to total_k */
  int64_t max_seqlen_q;     /* the longest query and key sequence (a bound: the grid's query tiles); >= 0 */
  int64_t max_seqlen_k;
  /* *_cuda: 1 (default) synchronizes options->stream, copies the 2 (B + 1) offsets to the host and checks
   * them (from 0, non-decreasing, ending at total_q / total_k, no sequence above max_seqlen_q /
   * max_seqlen_k): a KILN_ERROR naming the first wrong one. 0: no copy and no synchronization (CUDA-graph
   * capture); the offsets are then the caller's promise (the kernels clamp them, so wrong ones give wrong
   * results, never accesses outside the tensors). *_host calls always check them. */
  int32_t check_offsets;
} kiln_varlen_batch;
/* The defaults in the first struct_size bytes of *batch: struct_size set, empty offsets, check_offsets = 1
 * (sizeof(kiln_varlen_batch) is the one size this library knows; any other leaves *batch untouched). */
KILN_C_EXPORT void kiln_varlen_batch_init_sized(kiln_varlen_batch* batch, uint32_t struct_size);
#define kiln_varlen_batch_init(batch)                                                                        \
  kiln_varlen_batch_init_sized((batch), (uint32_t)sizeof(kiln_varlen_batch))

/* Forward: o and (when lse is not NULL) lse. _cuda: on options->stream, asynchronous unless lse is NULL (a
 * temporary LSE is then allocated and the stream synchronized) or batch->check_offsets;
 * KILN_ERROR_UNAVAILABLE where there is no GPU, after checking the arguments. _host: kiln's interpreter on
 * host memory. */
KILN_C_EXPORT kiln_status kiln_attention_varlen_forward_cuda(const kiln_tensor* q, const kiln_tensor* k,
                                                             const kiln_tensor* v, const kiln_tensor* o,
                                                             const kiln_tensor* lse,
                                                             const kiln_varlen_batch* batch,
                                                             const kiln_attention_options* options);
KILN_C_EXPORT kiln_status kiln_attention_varlen_forward_host(const kiln_tensor* q, const kiln_tensor* k,
                                                             const kiln_tensor* v, const kiln_tensor* o,
                                                             const kiln_tensor* lse,
                                                             const kiln_varlen_batch* batch,
                                                             const kiln_attention_options* options);
/* Backward: dq, dk, dv (shaped like q, k, v) from the forward's inputs, its o and lse and dout, with the
 * forward's batch, causal mode, scale and mods. Keys no row sees get dK = dV = 0, rows that see no key dQ =
 * 0. options->deterministic = 0 lets the tuner run dQ by f32 atomics where it times that pair of kernels the
 * faster, as the dense backward does. kiln_attention_varlen_backward_cuda allocates its f32 scratch and
 * synchronizes options->stream before returning; _cuda_workspace takes it from the caller (device memory,
 * 16-byte aligned, workspace_bytes of it, at least kiln_attention_varlen_backward_workspace_size's: Delta, f32
 * [H, total_q], and with deterministic = 0 the dQ accumulator, f32 [H, total_q, D]), enqueues the
 * kernels and returns without synchronizing, so that with batch->check_offsets = 0 and options->autotune =
 * KILN_AUTOTUNE_CACHED (after one eager call compiled the kernels) it can be captured in a CUDA graph. The
 * size query reads only q's ndim and shape ([total_q, H, D]) and needs no GPU. */
KILN_C_EXPORT kiln_status kiln_attention_varlen_backward_cuda(
    const kiln_tensor* q, const kiln_tensor* k, const kiln_tensor* v, const kiln_tensor* o,
    const kiln_tensor* lse, const kiln_tensor* dout, const kiln_tensor* dq, const kiln_tensor* dk,
    const kiln_tensor* dv, const kiln_varlen_batch* batch, const kiln_attention_options* options);
KILN_C_EXPORT kiln_status kiln_attention_varlen_backward_workspace_size(const kiln_tensor* q,
                                                                        const kiln_attention_options* options,
                                                                        uint64_t* bytes);
KILN_C_EXPORT kiln_status kiln_attention_varlen_backward_cuda_workspace(
    const kiln_tensor* q, const kiln_tensor* k, const kiln_tensor* v, const kiln_tensor* o,
    const kiln_tensor* lse, const kiln_tensor* dout, const kiln_tensor* dq, const kiln_tensor* dk,
    const kiln_tensor* dv, const kiln_varlen_batch* batch, void* workspace, uint64_t workspace_bytes,
    const kiln_attention_options* options);
KILN_C_EXPORT kiln_status kiln_attention_varlen_backward_host(
    const kiln_tensor* q, const kiln_tensor* k, const kiln_tensor* v, const kiln_tensor* o,
    const kiln_tensor* lse, const kiln_tensor* dout, const kiln_tensor* dq, const kiln_tensor* dk,
    const kiln_tensor* dv, const kiln_varlen_batch* batch, const kiln_attention_options* options);

/* ---- split-KV decoding (ABI version 5): flash_attn_with_kvcache without the cache update ----
 * q and o [B, N_Q, H, D]; the KV cache k_cache and v_cache contiguous [B, N_K, H_KV, D] or, with a block
 * table, pages [num_pages, page_size, H_KV, D] (page_size a power of two >= 16); lse f32 [B, H, N_Q] or NULL.
 * H a multiple of H_KV (GQA/MQA), D a multiple of 8 up to 256, f16/bf16/f32. Each sequence's queries attend
 * to its first seqlens_k[b] cache rows (all of them without seqlens_k); a query that sees no key gets O = 0,
 * LSE = -inf. Every check of kiln::attention::validate_decode_args applies. */
typedef struct kiln_decode_options {
  uint32_t struct_size; /* sizeof(kiln_decode_options); kiln_decode_options_init sets it */
  int32_t causal;       /* KILN_CAUSAL_NONE or KILN_CAUSAL_BOTTOM_RIGHT (query i of N_Q sees keys j <=
                           n_k - N_Q + i); KILN_CAUSAL_TOP_LEFT is a KILN_ERROR */
  double scale;         /* softmax scale; 0: 1/sqrt(D) */
  /* How many ranges each sequence's keys are cut into (1..1024); 0 (default) chooses from the GPU's SMs (the
   * *_host calls: from an H100's). */
  int32_t num_splits;
  int32_t autotune; /* kiln_autotune of the split kernel's config; KILN_AUTOTUNE_ENV (0) by default */
  void* stream;     /* *_cuda: the cudaStream_t / CUstream to launch on (not owned); NULL: legacy default */
  /* i32 [B], contiguous, or NULL: the keys of sequence b are its first seqlens_k[b] cache rows, each in [0,
   * the capacity]. Device values are not checked (the *_host calls check them); rows past them are never
   * read. */
  const kiln_tensor* seqlens_k;
  /* i32 [B, max_pages], the last dim contiguous, or NULL (a contiguous cache): key j of sequence b is row
   * j % page_size of page block_table[b, j / page_size], in any order; the capacity is max_pages * page_size.
   * Entries a sequence's keys reach must lie in [0, num_pages) (device values are not checked; the *_host
   * calls check them); the others are never read. */
  const kiln_tensor* block_table;
} kiln_decode_options;
/* The defaults in the first struct_size bytes of *options (sizeof(kiln_decode_options) is the one size this
 * library knows; any other leaves *options untouched). */
KILN_C_EXPORT void kiln_decode_options_init_sized(kiln_decode_options* options, uint32_t struct_size);
#define kiln_decode_options_init(options)                                                                    \
  kiln_decode_options_init_sized((options), (uint32_t)sizeof(kiln_decode_options))
/* The split kernel and the combine kernel on options->stream. kiln_decode_cuda allocates the f32 workspace
 * (the splits' partial results) and synchronizes the stream before freeing it; kiln_decode_cuda_workspace
 * takes it from the caller (device memory, 16-byte aligned, at least kiln_decode_workspace_size's bytes) and
 * returns without synchronizing, so that (after one call compiled the kernels, with options->autotune =
 * KILN_AUTOTUNE_CACHED) it can be captured in a CUDA graph. KILN_ERROR_UNAVAILABLE where there is no GPU,
 * after checking the arguments. kiln_decode_host: kiln's interpreter on host memory. */
KILN_C_EXPORT kiln_status kiln_decode_cuda(const kiln_tensor* q, const kiln_tensor* k_cache,
                                           const kiln_tensor* v_cache, const kiln_tensor* o,
                                           const kiln_tensor* lse, const kiln_decode_options* options);
/* The workspace a kiln_decode_cuda_workspace call with these arguments needs, in *bytes, and the split count
 * it runs, in *num_splits (may be NULL): checks the arguments as the call does (data addresses included);
 * with options->num_splits = 0 the count is chosen for the current GPU (KILN_ERROR_UNAVAILABLE without one,
 * after the checks), else it is options->num_splits and no GPU is needed. Passing *num_splits back as
 * options->num_splits pins the count the workspace was sized for. */
KILN_C_EXPORT kiln_status kiln_decode_workspace_size(const kiln_tensor* q, const kiln_tensor* k_cache,
                                                     const kiln_tensor* v_cache, const kiln_tensor* o,
                                                     const kiln_tensor* lse,
                                                     const kiln_decode_options* options, uint64_t* bytes,
                                                     int32_t* num_splits);
KILN_C_EXPORT kiln_status kiln_decode_cuda_workspace(const kiln_tensor* q, const kiln_tensor* k_cache,
                                                     const kiln_tensor* v_cache, const kiln_tensor* o,
                                                     const kiln_tensor* lse, void* workspace,
                                                     uint64_t workspace_bytes,
                                                     const kiln_decode_options* options);
KILN_C_EXPORT kiln_status kiln_decode_host(const kiln_tensor* q, const kiln_tensor* k_cache,
                                           const kiln_tensor* v_cache, const kiln_tensor* o,
                                           const kiln_tensor* lse, const kiln_decode_options* options);

/* ---- registered kernels (kiln's builtin registry) ---- */
/* The kernels as JSON: [{"name", "summary", "params": [{"name", "default", "takes"}], "size_args"}]. */
KILN_C_EXPORT kiln_status kiln_list_kernels(const char** json);
/* `kernel` with `params` overriding its default config, at `stage` ("ir", "lowered", "cuda", "ptx") for
 * `arch` (NULL or "": the current device's, else sm_90a). ptx needs NVRTC, not a GPU. */
KILN_C_EXPORT kiln_status kiln_emit(const char* kernel, const char* stage, const char* arch,
                                    const kiln_param* params, int32_t num_params, const char** text);
/* Runs `kernel` (default config with `params` applied) over `grid` (NULL: the kernel's grid rule over the
 * size arguments among `scalars`). Tensors bind the kernel's pointer parameters in order, scalars its scalar
 * parameters by name. _host: host tensors (contiguous), in the interpreter, written back in place. _cuda:
 * device tensors, compiled for the current device (cached per kernel and config) and launched on `stream`. */
KILN_C_EXPORT kiln_status kiln_run_host(const char* kernel, const kiln_tensor* tensors, int32_t num_tensors,
                                        const kiln_scalar* scalars, int32_t num_scalars, const kiln_param* params,
                                        int32_t num_params, const int64_t* grid);
KILN_C_EXPORT kiln_status kiln_run_cuda(const char* kernel, const kiln_tensor* tensors, int32_t num_tensors,
                                        const kiln_scalar* scalars, int32_t num_scalars, const kiln_param* params,
                                        int32_t num_params, const int64_t* grid, void* stream);

/* ---- autotuning (GPU only) ----
 * The config the autotuner picks, as JSON {"kernel", "config": {NAME: VALUE, ..., "num_warps", "num_stages"},
 * "source": "tuned" | "memory" | "disk" | "default", "ms" (the winner's time, absent without a timing), "key",
 * "table": [{"config", "ms", "status"}]}, remembered in the tuning cache as `kiln tune` does.
 * kiln_tune_attention_cuda: the FlashAttention-2 forward on these device tensors (lse may be NULL) with
 * options' mods (their kernel tuned apart from the built-in one), the mode from options->autotune (KILN_AUTOTUNE_ENV: tune now, as KILN_AUTOTUNE_FORCE); timing launches write
 * scratch copies of o and lse. kiln_tune_cuda: registered kernel `kernel` on device tensors and scalars bound
 * as kiln_run_cuda binds them, `params` fixed, the rest of its config space tuned (`autotune` as there), every
 * tensor's memory copied to scratch for the timing launches (the caller's tensors are never written). Both
 * return KILN_ERROR_UNAVAILABLE where there is no GPU, after checking the arguments. */
KILN_C_EXPORT kiln_status kiln_tune_attention_cuda(const kiln_tensor* q, const kiln_tensor* k, const kiln_tensor* v,
                                                   const kiln_tensor* o, const kiln_tensor* lse,
                                                   const kiln_attention_options* options, const char** json);
KILN_C_EXPORT kiln_status kiln_tune_cuda(const char* kernel, const kiln_tensor* tensors, int32_t num_tensors,
                                         const kiln_scalar* scalars, int32_t num_scalars, const kiln_param* params,
                                         int32_t num_params, int32_t autotune, const char** json);

#ifdef __cplusplus
}
#endif

#endif /* KILN_C_H */
