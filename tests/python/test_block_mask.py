"""kiln.block_mask on NumPy arrays (kiln's interpreter, through libkiln's kiln_block_mask_create_host): the forward
and the backward over a block mask equal the same calls without one (same mods), for the built-in causal mode,
causal and sliding-window mask mods, document masks read from mod tensors (lists that are runs and lists that are
not), score mods added on top and GQA; what a BlockMask says of itself; every mismatch between a block mask and a
call raising KilnError with kiln's message; and the handle freed with the object."""

import gc
import weakref

import numpy as np
import pytest

import kiln
from kiln import _block_mask

import mods_reference as ref
import reference

B, H, N_Q, N_K, D = 1, 2, 40, 48, 16
TILE = 16  # small tiles, so that 40 x 48 has several of each kind (full, partial, empty)


def inputs(seed=3, heads=H, kv_heads=H):
    rng = np.random.default_rng(seed)
    q = rng.uniform(-2, 2, size=(B, heads, N_Q, D)).astype(np.float32)
    k, v = (rng.uniform(-2, 2, size=(B, kv_heads, N_K, D)).astype(np.float32) for _ in range(2))
    dout = rng.uniform(-1, 1, size=q.shape).astype(np.float32)
    return q, k, v, dout


Q_DOC = np.array([[0] * 15 + [1] * 20 + [2] * 5], np.int32)
KV_DOC = np.array([[0] * 20 + [1] * 18 + [2] * 10], np.int32)
# Query tile 0 holds rows of documents 0 and 2, key tile 1 only document 1: its partial list is [0, 2], not a run.
Q_DOC_GAPS = np.array([[0] * 8 + [2] * 8 + [1] * 16 + [2] * 8], np.int32)
KV_DOC_GAPS = np.array([[0] * 16 + [1] * 16 + [2] * 16], np.int32)

# id: (the block mask's mods, the calls' mods (which may add score mods), mod_tensors, causal, reference mods)
CASES = {
    "causal_builtin": (None, None, {}, "top-left", []),
    "causal_bottom_right_builtin": (None, None, {}, "bottom-right", []),
    "causal_mod": ("causal", "causal", {}, None, [ref.Causal()]),
    "sliding_window": ("sliding_window=8,2", "sliding_window=8,2", {}, None, [ref.SlidingWindow(8, 2)]),
    "document": ("document", "document", {"q_doc": Q_DOC, "kv_doc": KV_DOC}, None, [ref.Document(Q_DOC, KV_DOC)]),
    "document_not_runs": ("document", "document", {"q_doc": Q_DOC_GAPS, "kv_doc": KV_DOC_GAPS}, None,
                          [ref.Document(Q_DOC_GAPS, KV_DOC_GAPS)]),
    "document_window_softcap": ("document;sliding_window=12,0", "softcap=2;document;sliding_window=12,0",
                                {"q_doc": Q_DOC, "kv_doc": KV_DOC}, None,
                                [ref.Softcap(2.0), ref.Document(Q_DOC, KV_DOC), ref.SlidingWindow(12, 0)]),
}


def make(name, tile=TILE, **sizes):
    bm_mods, _, tensors, causal, _ = CASES[name]
    args = dict(batch=B, heads=H, n_q=N_Q, n_k=N_K)
    args.update(sizes)
    return kiln.block_mask(args.pop("batch"), args.pop("heads"), args.pop("n_q"), args.pop("n_k"), block_m=tile,
                           block_n=tile, causal=causal, mods=bm_mods, mod_tensors=tensors, **args)


@pytest.mark.parametrize("name", CASES)
def test_forward_and_backward_over_a_block_mask_equal_the_calls_without(name):
    _, mods, tensors, causal, ref_mods = CASES[name]
    bm = make(name)
    q, k, v, dout = inputs()
    o, lse = kiln.attention(q, k, v, causal=causal, mods=mods, mod_tensors=tensors, return_lse=True)
    o_bm, lse_bm = kiln.attention(q, k, v, causal=causal, mods=mods, mod_tensors=tensors, return_lse=True,
                                  block_mask=bm)
    np.testing.assert_allclose(o_bm, o, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(lse_bm, lse, rtol=1e-6, atol=1e-6)
    assert reference.rel_l2(o_bm, ref.forward(q, k, v, ref_mods, causal=causal)[0]) < 1e-5  # and both are right
    grads = kiln.attention_backward(dout, q, k, v, o, lse, causal=causal, mods=mods, mod_tensors=tensors)
    grads_bm = kiln.attention_backward(dout, q, k, v, o, lse, causal=causal, mods=mods, mod_tensors=tensors,
                                       block_mask=bm)
    for got, want, what in zip(grads_bm, grads, ("dq", "dk", "dv")):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=what)


def test_gqa_and_bshd_over_a_block_mask():
    q, k, v, dout = inputs(heads=4, kv_heads=2)
    mods = "sliding_window=6,6"
    bm = kiln.block_mask(B, 4, N_Q, N_K, kv_heads=2, block_m=32, block_n=16, causal="bottom-right", mods=mods)
    assert bm.sizes == (B, 4, 2, N_Q, N_K) and (bm.block_m, bm.block_n) == (32, 16)
    qs, ks, vs, ds = (np.ascontiguousarray(t.transpose(0, 2, 1, 3)) for t in (q, k, v, dout))
    o, lse = kiln.attention(qs, ks, vs, layout="bshd", causal="bottom-right", mods=mods, return_lse=True)
    o_bm, lse_bm = kiln.attention(qs, ks, vs, layout="bshd", causal="bottom-right", mods=mods, return_lse=True,
                                  block_mask=bm)
    np.testing.assert_allclose(o_bm, o, rtol=1e-5, atol=1e-6)
    grads = kiln.attention_backward(ds, qs, ks, vs, o, lse, layout="bshd", causal="bottom-right", mods=mods)
    grads_bm = kiln.attention_backward(ds, qs, ks, vs, o, lse, layout="bshd", causal="bottom-right", mods=mods,
                                       block_mask=bm)
    for got, want in zip(grads_bm, grads):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_sinks_and_their_gradient_over_a_block_mask():
    q, k, v, dout = inputs()
    sinks = np.array([0.7, -0.4], np.float32)
    bm = kiln.block_mask(B, H, N_Q, N_K, block_m=TILE, block_n=TILE, mods="causal")  # sinks change no tile
    kw = dict(mods="causal;sinks", mod_tensors={"sinks": sinks})
    o, lse = kiln.attention(q, k, v, return_lse=True, **kw)
    o_bm, lse_bm = kiln.attention(q, k, v, return_lse=True, block_mask=bm, **kw)
    np.testing.assert_allclose(o_bm, o, rtol=1e-5, atol=1e-6)
    grads = kiln.attention_backward(dout, q, k, v, o, lse, return_dsink=True, **kw)
    grads_bm = kiln.attention_backward(dout, q, k, v, o, lse, return_dsink=True, block_mask=bm, **kw)
    for got, want in zip(grads_bm, grads):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_what_a_block_mask_says_of_itself():
    bm = make("causal_mod", tile=32)
    assert not bm.on_cuda and bm.sizes == (B, H, H, N_Q, N_K)
    assert (bm.block_m, bm.block_n) == (32, 32) and bm.runs is True
    assert bm.causal == "none" and bm.mask_mods == "causal_top_left"
    assert "tiles 32x32" in repr(bm) and "runs=True" in repr(bm)
    assert make("causal_builtin").causal == "top-left" and make("causal_builtin").mask_mods == ""
    assert make("document").runs is True  # each query tile sees one range of key tiles
    assert make("document_not_runs").runs is False
    assert isinstance(bm.id, int) and bm.id > 0 and make("causal_mod").id != bm.id
    sw = make("sliding_window")
    assert sw.mask_mods.startswith("sliding_window")


def test_mismatches_between_block_mask_and_call_are_kiln_errors():
    q, k, v, dout = inputs()
    causal_bm = make("causal_mod")
    with pytest.raises(kiln.KilnError, match=r"block mask built for the mask mods \[causal_top_left\].*the "
                                             r"attention has mask mods \[sliding_window\(8,2\)\]"):
        kiln.attention(q, k, v, mods="sliding_window=8,2", block_mask=causal_bm)
    with pytest.raises(kiln.KilnError, match=r"block mask built for B1 H2 H_KV2 N_Q40 N_K48; the attention has "
                                             r"B1 H2 H_KV2 N_Q32 N_K48"):
        kiln.attention(q[:, :, :32].copy(), k, v, mods="causal", block_mask=causal_bm)
    with pytest.raises(kiln.KilnError, match=r"block mask built with causal none; the attention has causal "
                                             r"top-left"):
        kiln.attention(q, k, v, causal="top-left", mods="causal", block_mask=causal_bm)
    o, lse = kiln.attention(q, k, v, mods="causal", return_lse=True)
    with pytest.raises(kiln.KilnError, match=r"kiln_attention_backward_host: options.block_mask: block mask built "
                                             r"for the mask mods"):
        kiln.attention_backward(dout, q, k, v, o, lse, block_mask=causal_bm)  # the forward's mods forgotten
    gqa_bm = kiln.block_mask(B, H, N_Q, N_K, kv_heads=1, block_m=TILE, block_n=TILE, mods="causal")
    with pytest.raises(kiln.KilnError, match=r"built for B1 H2 H_KV1"):
        kiln.attention(q, k, v, mods="causal", block_mask=gqa_bm)
    with pytest.raises(kiln.KilnError, match=r"block_mask must be None or a kiln.BlockMask"):
        kiln.attention(q, k, v, block_mask=causal_bm.id)


def test_bad_block_mask_arguments_are_kiln_errors():
    with pytest.raises(kiln.KilnError, match=r"block_m = 24; expected a power of two in \[16, 256\]"):
        kiln.block_mask(B, H, N_Q, N_K, block_m=24, block_n=16, mods="causal")
    with pytest.raises(kiln.KilnError, match=r"sizes.N_Q is 0; expected at least 1"):
        kiln.block_mask(B, H, 0, N_K, block_m=16, block_n=16)
    with pytest.raises(kiln.KilnError, match=r"'q_doc'"):
        kiln.block_mask(B, H, N_Q, N_K, block_m=16, block_n=16, mods="document")  # its tensors missing
    with pytest.raises(kiln.KilnError, match=r"unknown mod 'flash'"):
        kiln.block_mask(B, H, N_Q, N_K, mods="flash")
    with pytest.raises(kiln.KilnError, match=r"n_q must be an int"):
        kiln.block_mask(B, H, 4.0, N_K)
    with pytest.raises(kiln.KilnError, match=r"device must be 'cuda'.*or 'cpu'"):
        kiln.block_mask(B, H, N_Q, N_K, device="tpu")
    assert kiln.block_mask(np.int64(1), 2, 16, 16, block_m=16, block_n=16, device="cpu").sizes == (1, 2, 2, 16, 16)


@pytest.mark.skipif(kiln.device_count() > 0, reason="checks the no-GPU answer")
def test_a_cuda_block_mask_needs_a_gpu():
    with pytest.raises(kiln.KilnUnavailableError, match=r"kiln_block_mask_create_cuda needs a GPU"):
        kiln.block_mask(B, H, N_Q, N_K, block_m=16, block_n=16, mods="causal", device="cuda")
    with pytest.raises(kiln.KilnError, match=r"block_n = 8; expected a power of two"):  # the mistake first
        kiln.block_mask(B, H, N_Q, N_K, block_m=16, block_n=8, mods="causal", device="cuda")


def test_the_handle_is_freed_with_the_object_and_its_id_goes_stale():
    bm = make("sliding_window")
    alive, ident = weakref.ref(bm), bm.id
    assert _block_mask.by_id(ident) is bm and _block_mask.by_id(0) is None
    finalizer = bm._finalizer
    del bm
    gc.collect()
    assert alive() is None and not finalizer.alive  # kiln_block_mask_destroy ran
    with pytest.raises(kiln.KilnError, match=rf"block mask id {ident} was freed"):
        _block_mask.by_id(ident)
