/* The C ABI from C: kiln_c.h compiles as C99 with warnings as errors, libkiln.so links and answers, and each
 * kind of failure comes back as its status with a message, never as a crash. Built and run by CTest
 * (label capi); the Python suite (tests/python/test_abi.py) covers the same ground more widely. */
#include "capi/kiln_c.h"

#include <stdio.h>
#include <string.h>

static int failures = 0;

static void expect(int ok, const char* what) {
  if (!ok) {
    fprintf(stderr, "FAILED: %s (last error: %s)\n", what, kiln_last_error());
    ++failures;
  }
}

static kiln_tensor dense4(void* data, int32_t dtype, int64_t b, int64_t h, int64_t n, int64_t d) {
  kiln_tensor t;
  memset(&t, 0, sizeof t);
  t.data = data;
  t.dtype = dtype;
  t.ndim = 4;
  t.shape[0] = b, t.shape[1] = h, t.shape[2] = n, t.shape[3] = d;
  t.strides[3] = 1, t.strides[2] = d, t.strides[1] = n * d, t.strides[0] = h * n * d;
  return t;
}

int main(void) {
  static float q[2 * 8 * 16] __attribute__((aligned(16))), k[2 * 8 * 16] __attribute__((aligned(16))),
      v[2 * 8 * 16] __attribute__((aligned(16))), o[2 * 8 * 16] __attribute__((aligned(16)));
  kiln_attention_options opts;
  kiln_tensor tq, tk, tv, to;
  int32_t count = -1;
  const char* why = NULL;
  int i;

  expect(kiln_abi_version() == KILN_C_ABI_VERSION, "ABI version");
  expect(strlen(kiln_version()) > 0, "version");
  expect(strcmp(kiln_status_name(KILN_ERROR_UNAVAILABLE), "KILN_ERROR_UNAVAILABLE") == 0, "status name");

  for (i = 0; i < 2 * 8 * 16; ++i)
    q[i] = k[i] = 0.01f * (float)(i % 7), v[i] = (float)(i % 16);
  tq = dense4(q, KILN_F32, 1, 2, 8, 16);
  tk = dense4(k, KILN_F32, 1, 2, 8, 16);
  tv = dense4(v, KILN_F32, 1, 2, 8, 16);
  to = dense4(o, KILN_F32, 1, 2, 8, 16);
  kiln_attention_options_init(&opts);
  opts.causal = KILN_CAUSAL_TOP_LEFT;
  expect(kiln_attention_forward_host(&tq, &tk, &tv, &to, NULL, &opts) == KILN_OK, "forward on host memory");
  expect(kiln_last_error()[0] == '\0', "no error after success");
  /* Row 0 sees only key 0: its output is V's row 0 of its head, exactly. */
  for (i = 0; i < 16; ++i)
    expect(o[i] == v[i], "causal row 0 equals V row 0");

  expect(kiln_attention_forward_host(NULL, &tk, &tv, &to, NULL, &opts) == KILN_ERROR_INVALID_ARGUMENT, "null q");
  expect(strcmp(kiln_last_error(), "q must not be NULL") == 0, "null q message");
  opts.causal = 5;
  expect(kiln_attention_forward_host(&tq, &tk, &tv, &to, NULL, &opts) == KILN_ERROR_INVALID_ARGUMENT, "bad enum");
  opts.causal = KILN_CAUSAL_NONE;
  tk.shape[3] = 8;
  expect(kiln_attention_forward_host(&tq, &tk, &tv, &to, NULL, &opts) == KILN_ERROR, "a caller's mistake");
  expect(strstr(kiln_last_error(), "attention::forward") != NULL, "kiln::Error's message");

  tk.shape[3] = 16;

  /* ABI version 2: the init macro sizes the whole struct; a version-1 sized struct is still accepted. */
  expect(opts.struct_size == sizeof(kiln_attention_options) && opts.exact_masked_v == 0 &&
             opts.autotune == KILN_AUTOTUNE_ENV,
         "init fills the version-2 fields");
  opts.causal = KILN_CAUSAL_NONE;
  {
    kiln_attention_options v1;
    uint64_t bytes = 0;
    memset(&v1, 0x7f, sizeof v1);
    kiln_attention_options_init_sized(&v1, (uint32_t)KILN_ATTENTION_OPTIONS_V1_SIZE);
    expect(v1.struct_size == KILN_ATTENTION_OPTIONS_V1_SIZE && v1.deterministic == 1, "version-1 init");
    expect(v1.exact_masked_v == 0x7f7f7f7f, "version-1 init writes nothing past its size");
    expect(kiln_attention_forward_host(&tq, &tk, &tv, &to, NULL, &v1) == KILN_OK, "a version-1 struct");
    /* Delta only: 1 * 2 * 8 rows of f32. */
    expect(kiln_attention_backward_workspace_size(&tq, &opts, &bytes) == KILN_OK && bytes == 2 * 8 * 4,
           "workspace size, deterministic");
    /* Non-deterministic: the f32 dQ accumulator after it, at a 256-byte boundary. */
    opts.deterministic = 0;
    expect(kiln_attention_backward_workspace_size(&tq, &opts, &bytes) == KILN_OK && bytes == 256 + 2 * 8 * 16 * 4,
           "workspace size, atomic dQ allowed");
    opts.deterministic = 1;
    opts.autotune = 9;
    expect(kiln_attention_backward_workspace_size(&tq, &opts, &bytes) == KILN_ERROR_INVALID_ARGUMENT,
           "bad autotune mode");
    opts.autotune = KILN_AUTOTUNE_CACHED;
  }

  /* ABI version 3: library mods by spec, their tensors, and a version-2 sized struct still accepted. */
  expect(opts.mods == NULL && opts.mod_tensors == NULL && opts.num_mod_tensors == 0 && opts.dsink == NULL,
         "init fills the version-3 fields");
  {
    static float slopes[2] = {0.5f, 0.25f};
    kiln_mod_tensor mt;
    kiln_attention_options v2;
    memset(&mt, 0, sizeof mt);
    mt.name = "alibi_slopes";
    mt.tensor.data = slopes;
    mt.tensor.dtype = KILN_F32;
    mt.tensor.ndim = 1;
    mt.tensor.shape[0] = 2;
    mt.tensor.strides[0] = 1;
    opts.autotune = KILN_AUTOTUNE_ENV;
    opts.mods = "causal";
    expect(kiln_attention_forward_host(&tq, &tk, &tv, &to, NULL, &opts) == KILN_OK, "forward with a mask mod");
    for (i = 0; i < 16; ++i)
      expect(o[i] == v[i], "causal mod: row 0 equals V row 0");
    opts.mods = "causal;alibi";
    opts.mod_tensors = &mt;
    opts.num_mod_tensors = 1;
    expect(kiln_attention_forward_host(&tq, &tk, &tv, &to, NULL, &opts) == KILN_OK, "forward with a mod tensor");
    opts.mods = "causal;flash";
    expect(kiln_attention_forward_host(&tq, &tk, &tv, &to, NULL, &opts) == KILN_ERROR &&
               strstr(kiln_last_error(), "unknown mod 'flash'") != NULL,
           "a bad mod spec is a caller's mistake with kiln's message");
    opts.mods = "causal";
    opts.num_mod_tensors = -1;
    expect(kiln_attention_forward_host(&tq, &tk, &tv, &to, NULL, &opts) == KILN_ERROR_INVALID_ARGUMENT,
           "negative num_mod_tensors");
    opts.num_mod_tensors = 0;
    opts.dsink = &to;
    expect(kiln_attention_forward_host(&tq, &tk, &tv, &to, NULL, &opts) == KILN_ERROR &&
               strstr(kiln_last_error(), "dsink") != NULL,
           "dsink on a forward call");
    opts.dsink = NULL;
    opts.mods = NULL;
    opts.mod_tensors = NULL;

    memset(&v2, 0x7f, sizeof v2);
    kiln_attention_options_init_sized(&v2, (uint32_t)KILN_ATTENTION_OPTIONS_V2_SIZE);
    expect(v2.struct_size == KILN_ATTENTION_OPTIONS_V2_SIZE && v2.autotune == KILN_AUTOTUNE_ENV, "version-2 init");
    expect(v2.num_mod_tensors == 0x7f7f7f7f, "version-2 init writes nothing past its size");
    expect(kiln_attention_forward_host(&tq, &tk, &tv, &to, NULL, &v2) == KILN_OK,
           "a version-2 struct (its garbage past the end never read)");
  }

  /* ABI version 4: a block mask on the host, named in the options; a version-3 sized struct still accepted. */
  expect(opts.block_mask == NULL, "init fills the version-4 field");
  {
    kiln_block_mask *bm = NULL, *bad = NULL;
    kiln_attention_options v3;
    const char* json = NULL;
    static float expected[2 * 8 * 16];
    opts.mods = "causal";
    expect(kiln_attention_forward_host(&tq, &tk, &tv, &to, NULL, &opts) == KILN_OK, "causal forward");
    memcpy(expected, o, sizeof expected);
    expect(kiln_block_mask_create_host(1, 2, 2, 8, 8, 16, 16, &opts, &bm) == KILN_OK && bm != NULL,
           "block mask on the host");
    expect(kiln_block_mask_info(bm, &json) == KILN_OK && strstr(json, "\"runs\":true") != NULL &&
               strstr(json, "\"memory\":\"host\"") != NULL,
           "block mask info");
    opts.block_mask = bm;
    memset(o, 0, sizeof o);
    expect(kiln_attention_forward_host(&tq, &tk, &tv, &to, NULL, &opts) == KILN_OK, "forward over a block mask");
    expect(memcmp(o, expected, sizeof expected) == 0, "the same output over the block mask");
    expect(kiln_attention_forward_cuda(&tq, &tk, &tv, &to, NULL, &opts) == KILN_ERROR &&
               strstr(kiln_last_error(), "made by kiln_block_mask_create_host") != NULL,
           "a host block mask given to a cuda call");
    opts.mods = NULL;
    expect(kiln_attention_forward_host(&tq, &tk, &tv, &to, NULL, &opts) == KILN_ERROR &&
               strstr(kiln_last_error(), "block mask built for the mask mods") != NULL,
           "a block mask of other mask mods");
    opts.block_mask = NULL;
    expect(kiln_block_mask_create_host(1, 2, 2, 8, 8, 24, 16, &opts, &bad) == KILN_ERROR && bad == NULL,
           "a tile that is not a power of two");
    kiln_block_mask_destroy(bm);
    kiln_block_mask_destroy(NULL);

    memset(&v3, 0x7f, sizeof v3);
    kiln_attention_options_init_sized(&v3, (uint32_t)KILN_ATTENTION_OPTIONS_V3_SIZE);
    expect(v3.struct_size == KILN_ATTENTION_OPTIONS_V3_SIZE && v3.dsink == NULL, "version-3 init");
    expect(kiln_attention_forward_host(&tq, &tk, &tv, &to, NULL, &v3) == KILN_OK,
           "a version-3 struct (its garbage block_mask never read)");
  }

  /* ABI version 5: packed attention and decoding on host memory. q, k, v, o above are [1, 2, 8, 16] bhsd; one
   * packed sequence of 8 tokens reads the same memory as [8 tokens, 1 head, 16] (the first head). */
  {
    static int32_t cu[2] = {0, 8};
    static float packed_o[8 * 16] __attribute__((aligned(16)));
    kiln_varlen_batch batch;
    kiln_decode_options dopts;
    kiln_tensor pq, pk, pv, po, cq, ck, cv, co;
    memset(&batch, 0x7f, sizeof batch);
    kiln_varlen_batch_init(&batch);
    expect(batch.struct_size == sizeof batch && batch.check_offsets == 1 && batch.max_seqlen_q == 0,
           "varlen batch init");
    batch.cu_seqlens_q.data = batch.cu_seqlens_k.data = cu;
    batch.cu_seqlens_q.shape[0] = batch.cu_seqlens_k.shape[0] = 2;
    batch.cu_seqlens_q.strides[0] = batch.cu_seqlens_k.strides[0] = 1;
    batch.max_seqlen_q = batch.max_seqlen_k = 8;
    pq = dense4(q, KILN_F32, 1, 8, 1, 16);
    pk = dense4(k, KILN_F32, 1, 8, 1, 16);
    pv = dense4(v, KILN_F32, 1, 8, 1, 16);
    po = dense4(packed_o, KILN_F32, 1, 8, 1, 16);
    for (i = 0; i < 3; ++i) { /* [total, heads, D]: drop the leading 1 */
      pq.shape[i] = pq.shape[i + 1], pq.strides[i] = pq.strides[i + 1];
      pk.shape[i] = pk.shape[i + 1], pk.strides[i] = pk.strides[i + 1];
      pv.shape[i] = pv.shape[i + 1], pv.strides[i] = pv.strides[i + 1];
      po.shape[i] = po.shape[i + 1], po.strides[i] = po.strides[i + 1];
    }
    pq.ndim = pk.ndim = pv.ndim = po.ndim = 3;
    kiln_attention_options_init(&opts);
    opts.causal = KILN_CAUSAL_TOP_LEFT;
    expect(kiln_attention_varlen_forward_host(&pq, &pk, &pv, &po, NULL, &batch, &opts) == KILN_OK,
           "packed forward on host memory");
    for (i = 0; i < 16; ++i)
      expect(packed_o[i] == v[i], "packed causal row 0 equals V row 0");
    batch.struct_size = 8;
    expect(kiln_attention_varlen_forward_host(&pq, &pk, &pv, &po, NULL, &batch, &opts) ==
               KILN_ERROR_INVALID_ARGUMENT,
           "a varlen batch of an unknown size");

    /* Decoding: one query (q's row 0 of head 0 as [1, 1, 1, 16]) against the 8 keys of k's head 0 as a
     * contiguous cache [1, 8, 1, 16]; bottom-right causality lets it see all 8. */
    memset(&dopts, 0x7f, sizeof dopts);
    kiln_decode_options_init(&dopts);
    expect(dopts.struct_size == sizeof dopts && dopts.num_splits == 0 && dopts.block_table == NULL,
           "decode options init");
    dopts.causal = KILN_CAUSAL_BOTTOM_RIGHT;
    cq = dense4(q, KILN_F32, 1, 1, 1, 16);
    ck = dense4(k, KILN_F32, 1, 8, 1, 16);
    cv = dense4(v, KILN_F32, 1, 8, 1, 16);
    co = dense4(packed_o, KILN_F32, 1, 1, 1, 16);
    expect(kiln_decode_host(&cq, &ck, &cv, &co, NULL, &dopts) == KILN_OK, "decode on host memory");
    dopts.causal = KILN_CAUSAL_TOP_LEFT;
    expect(kiln_decode_host(&cq, &ck, &cv, &co, NULL, &dopts) == KILN_ERROR &&
               strstr(kiln_last_error(), "TopLeft") != NULL,
           "decode refuses top-left causality with kiln's message");
  }

  /* ABI version 6: forward plans. Without a GPU only their argument checks and an empty problem's plan run. */
  {
    kiln_attention_plan* plan = (kiln_attention_plan*)&opts; /* not NULL: a failed create must clear it */
    static float lse[2 * 8] __attribute__((aligned(16)));
    kiln_tensor tl, eq, ek, ev, eo, el;
    int32_t gpus = 0;
    expect(kiln_device_count(&gpus, NULL) == KILN_OK, "device count for the plans");
    memset(&tl, 0, sizeof tl);
    tl.data = lse, tl.dtype = KILN_F32, tl.ndim = 3;
    tl.shape[0] = 1, tl.shape[1] = 2, tl.shape[2] = 8;
    tl.strides[0] = 16, tl.strides[1] = 8, tl.strides[2] = 1;
    kiln_attention_options_init(&opts);
    opts.autotune = KILN_AUTOTUNE_OFF;
    expect(kiln_attention_forward_plan(&tq, &tk, &tv, &to, &tl, &opts, NULL) == KILN_ERROR_INVALID_ARGUMENT &&
               strcmp(kiln_last_error(), "plan must not be NULL") == 0,
           "a plan with nowhere to go");
    expect(kiln_attention_forward_plan(&tq, &tk, &tv, &to, NULL, &opts, &plan) == KILN_ERROR_INVALID_ARGUMENT &&
               plan == NULL && strstr(kiln_last_error(), "lse") != NULL,
           "a plan without lse");
    tk.shape[3] = 8;
    expect(kiln_attention_forward_plan(&tq, &tk, &tv, &to, &tl, &opts, &plan) == KILN_ERROR &&
               strstr(kiln_last_error(), "attention::ForwardPlan: k has head dim 8") != NULL,
           "a plan's validation runs where there is no GPU too");
    tk.shape[3] = 16;
    opts.mods = "causal";
    expect(kiln_attention_forward_plan(&tq, &tk, &tv, &to, &tl, &opts, &plan) == KILN_ERROR &&
               strstr(kiln_last_error(), "kiln_attention_forward_cuda") != NULL,
           "a plan with mods is refused");
    opts.mods = NULL;
    if (gpus == 0)
      expect(kiln_attention_forward_plan(&tq, &tk, &tv, &to, &tl, &opts, &plan) == KILN_ERROR_UNAVAILABLE &&
                 plan == NULL,
             "a valid plan without a GPU");
    expect(kiln_attention_plan_forward(NULL, q, k, v, o, lse, NULL, KILN_AUTOTUNE_ENV) ==
                   KILN_ERROR_INVALID_ARGUMENT &&
               strcmp(kiln_last_error(), "plan must not be NULL") == 0,
           "running no plan");
    /* B = 0: nothing to compute, so a plan is made without a GPU and its runs launch nothing. */
    eq = tq, ek = tk, ev = tv, eo = to, el = tl;
    eq.shape[0] = ek.shape[0] = ev.shape[0] = eo.shape[0] = el.shape[0] = 0;
    expect(kiln_attention_forward_plan(&eq, &ek, &ev, &eo, &el, &opts, &plan) == KILN_OK && plan != NULL,
           "an empty problem's plan");
    expect(kiln_attention_plan_forward(plan, NULL, NULL, NULL, NULL, NULL, NULL, KILN_AUTOTUNE_CACHED) == KILN_OK,
           "an empty plan runs nothing");
    expect(kiln_attention_plan_forward(plan, NULL, NULL, NULL, NULL, NULL, NULL, 9) == KILN_ERROR_INVALID_ARGUMENT,
           "a run's unknown autotune mode");
    kiln_attention_plan_destroy(plan);
    kiln_attention_plan_destroy(NULL);
  }

  expect(kiln_device_count(&count, &why) == KILN_OK && count >= 0 && why != NULL, "device count");
  printf("kiln %s, C ABI %d, %d CUDA device(s)%s%s\n", kiln_version(), kiln_abi_version(), count,
         count ? "" : ": ", count ? "" : why);
  if (failures == 0)
    printf("all C ABI checks passed\n");
  return failures == 0 ? 0 : 1;
}
