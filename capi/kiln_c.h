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

#define KILN_C_ABI_VERSION 4
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
