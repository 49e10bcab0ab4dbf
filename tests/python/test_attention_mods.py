"""kiln.attention and kiln.attention_backward with kiln's library mods on NumPy arrays (kiln's interpreter,
through libkiln's C ABI) against the double-precision reference of mods_reference.py: each mod alone, mods
combined (as a ';'-separated string and as a list), GQA, bshd, the sink logits' gradient; and every argument
mistake raising KilnError with kiln's message."""

import numpy as np
import pytest

import kiln
import mods_reference as ref
import reference

FWD_TOL, BWD_TOL = 1e-5, 1e-4  # f32 inputs: relative L2 error against the double reference

B, H, H_KV, N_Q, N_K, D = 1, 2, 2, 40, 48, 16


def inputs(seed=1, heads=H, kv_heads=H_KV, n_q=N_Q, n_k=N_K, layout="bhsd"):
    rng = np.random.default_rng(seed)
    qs, ks = ((B, heads, n_q, D), (B, kv_heads, n_k, D)) if layout == "bhsd" else \
        ((B, n_q, heads, D), (B, n_k, kv_heads, D))
    q, k, v = (rng.uniform(-2, 2, size=s).astype(np.float32) for s in (qs, ks, ks))
    dout = rng.uniform(-1, 1, size=qs).astype(np.float32)
    return q, k, v, dout


SLOPES = np.array([0.5, 0.125], np.float32)
SINKS = np.array([0.7, -0.4], np.float32)
Q_DOC = np.array([[0] * 15 + [1] * 20 + [2] * 5], np.int32)
KV_DOC = np.array([[0] * 20 + [1] * 18 + [2] * 10], np.int32)

# id: (mods as kiln takes them, mod_tensors, the reference's mods, sinks, causal)
CASES = {
    "causal": ("causal", {}, [ref.Causal()], None, None),
    "sliding_window": ("sliding_window=8,2", {}, [ref.SlidingWindow(8, 2)], None, None),
    "prefix_lm": ("prefix_lm=10", {}, [ref.PrefixLM(10)], None, None),
    "softcap": ("softcap=2", {}, [ref.Softcap(2.0)], None, None),
    "alibi": ("alibi", {"alibi_slopes": SLOPES}, [ref.Alibi(SLOPES)], None, None),
    "document": ("document", {"q_doc": Q_DOC, "kv_doc": KV_DOC}, [ref.Document(Q_DOC, KV_DOC)], None, None),
    "sinks": ("sinks", {"sinks": SINKS}, [], SINKS, None),
    "combined_string": ("softcap=3; sliding_window=12,0;alibi", {"alibi_slopes": SLOPES},
                        [ref.Softcap(3.0), ref.Alibi(SLOPES), ref.SlidingWindow(12, 0)], None, None),
    "combined_list": (["sinks", "document", "softcap=4"], {"sinks": SINKS, "q_doc": Q_DOC, "kv_doc": KV_DOC},
                      [ref.Softcap(4.0), ref.Document(Q_DOC, KV_DOC)], SINKS, "bottom-right"),
    # The same mods written as expressions (FlexAttention's score_mod / mask_mod, as text).
    "expressions": (["score=3 * tanh(score / 3) + slopes[h] * (kv_idx - q_idx)", "mask=kv_idx >= q_idx - 12",
                     "mask=q_doc:i32[b, q_idx] == kv_doc:i32[b, kv_idx]"],
                    {"slopes": SLOPES, "q_doc": Q_DOC, "kv_doc": KV_DOC},
                    [ref.Softcap(3.0), ref.Alibi(SLOPES), ref.SlidingWindow(12, N_K), ref.Document(Q_DOC, KV_DOC)],
                    None, None),
}


@pytest.mark.parametrize("name", CASES)
def test_forward_with_mods_matches_reference(name):
    mods, tensors, ref_mods, sinks, causal = CASES[name]
    q, k, v, _ = inputs()
    o, lse = kiln.attention(q, k, v, causal=causal, mods=mods, mod_tensors=tensors, return_lse=True)
    ref_o, ref_lse = ref.forward(q, k, v, ref_mods, causal=causal, sinks=sinks)
    assert reference.rel_l2(o, ref_o) < FWD_TOL
    assert reference.rel_l2(lse, ref_lse) < 1e-6


@pytest.mark.parametrize("name", CASES)
def test_backward_with_mods_matches_reference(name):
    mods, tensors, ref_mods, sinks, causal = CASES[name]
    q, k, v, dout = inputs()
    o, lse = kiln.attention(q, k, v, causal=causal, mods=mods, mod_tensors=tensors, return_lse=True)
    grads = kiln.attention_backward(dout, q, k, v, o, lse, causal=causal, mods=mods, mod_tensors=tensors,
                                    return_dsink=sinks is not None)
    ref_grads = ref.backward(dout, q, k, v, ref_mods, causal=causal, sinks=sinks)
    for got, want, what in zip(grads, ref_grads, ("dq", "dk", "dv", "dsink")):
        assert reference.rel_l2(got, want) < BWD_TOL, what
    if sinks is not None:
        assert grads[3].shape == (H,) and grads[3].dtype == np.float32
        assert np.all(grads[3] != 0)


def test_mods_with_gqa_bshd_and_broadcast_tensors():
    q, k, v, dout = inputs(heads=4, kv_heads=2, layout="bshd")
    slopes = np.array([0.25], np.float32)  # one slope for every head: a dim of extent 1 broadcasts
    tensors = {"alibi_slopes": slopes}
    mods = "alibi;sliding_window=6,6"
    ref_mods = [ref.Alibi(np.repeat(slopes, 4)), ref.SlidingWindow(6, 6)]
    o, lse = kiln.attention(q, k, v, layout="bshd", mods=mods, mod_tensors=tensors, return_lse=True)
    ref_o, _ = ref.forward(q, k, v, ref_mods, layout="bshd")
    assert reference.rel_l2(o, ref_o) < FWD_TOL
    grads = kiln.attention_backward(dout, q, k, v, o, lse, layout="bshd", mods=mods, mod_tensors=tensors)
    for got, want in zip(grads, ref.backward(dout, q, k, v, ref_mods, layout="bshd")):
        assert reference.rel_l2(got, want) < BWD_TOL


def test_causal_mod_equals_causal_option():
    q, k, v, _ = inputs(n_k=N_Q)
    np.testing.assert_allclose(kiln.attention(q, k, v, mods="causal"), kiln.attention(q, k, v, causal="top-left"),
                               rtol=1e-6, atol=1e-6)


def test_sinks_gradient_matches_finite_differences():
    q, k, v, dout = inputs(seed=3)
    tensors = {"sinks": SINKS.copy()}
    o, lse = kiln.attention(q, k, v, mods="sinks", mod_tensors=tensors, return_lse=True)
    dsink = kiln.attention_backward(dout, q, k, v, o, lse, mods="sinks", mod_tensors=tensors, return_dsink=True)[3]
    eps = 1e-3
    for h in range(H):
        up, down = SINKS.astype(np.float64), SINKS.astype(np.float64)
        up[h] += eps
        down[h] -= eps
        loss = [(ref.forward(q, k, v, [], sinks=s)[0] * dout).sum() for s in (up, down)]
        assert abs(dsink[h] - (loss[0] - loss[1]) / (2 * eps)) < 1e-3 * max(1.0, abs(dsink[h]))


def test_one_tensor_read_along_queries_and_keys():
    """FlexAttention's document mask reads one tensor at q_idx and at kv_idx; so may an expression: one tensor
    given, read along both (N_Q == N_K); where the lengths differ it cannot run along both, and says so."""
    q, k, v, dout = inputs(n_k=N_Q)
    mods = "mask=doc:i32[b, q_idx] == doc:i32[b, kv_idx]"
    ref_mods = [ref.Document(Q_DOC, Q_DOC)]
    o, lse = kiln.attention(q, k, v, mods=mods, mod_tensors={"doc": Q_DOC}, return_lse=True)
    ref_o, ref_lse = ref.forward(q, k, v, ref_mods)
    assert reference.rel_l2(o, ref_o) < FWD_TOL
    assert reference.rel_l2(lse, ref_lse) < 1e-6
    grads = kiln.attention_backward(dout, q, k, v, o, lse, mods=mods, mod_tensors={"doc": Q_DOC})
    for got, want in zip(grads, ref.backward(dout, q, k, v, ref_mods)):
        assert reference.rel_l2(got, want) < BWD_TOL
    q, k, v, _ = inputs()  # N_Q 40, N_K 48
    expect_error(lambda: kiln.attention(q, k, v, mods=mods, mod_tensors={"doc": Q_DOC}),
                 "mod tensor 'doc' (read along [B, N_K]) has extent 40 in dim 1 (N_K); expected 48 or 1")


def expect_error(call, *parts):
    with pytest.raises(kiln.KilnError) as e:
        call()
    for p in parts:
        assert p in str(e.value), f"{p!r} not in {str(e.value)!r}"


def test_mod_argument_errors_carry_kilns_message():
    q, k, v, dout = inputs()
    o, lse = kiln.attention(q, k, v, return_lse=True)
    expect_error(lambda: kiln.attention(q, k, v, mods="flash"), "unknown mod 'flash'", "sliding_window=LEFT[,RIGHT]",
                 "kiln_attention_options.mods")
    expect_error(lambda: kiln.attention(q, k, v, mods="softcap"), "softcap=<CAP>")
    expect_error(lambda: kiln.attention(q, k, v, mods="score=score * tanhh(score)"), "unknown function 'tanhh'")
    expect_error(lambda: kiln.attention(q, k, v, mods="mask=kv_idx <= q_idx +"), "expected a number, a name or '('",
                 "column 18")
    expect_error(lambda: kiln.attention(q, k, v, mods="mask=score > 0"), "'score' is a score mod's input")
    expect_error(lambda: kiln.attention(q, k, v, mods="sliding_window=4,x"), "'x' is not a number of keys")
    expect_error(lambda: kiln.attention(q, k, v, mods="sinks;sinks", mod_tensors={"sinks": SINKS}),
                 "mod specs 'sinks;sinks'")
    expect_error(lambda: kiln.attention(q, k, v, mods="alibi"), "'alibi_slopes'", "does not hold")
    expect_error(lambda: kiln.attention(q, k, v, mods="alibi", mod_tensors={"alibi_slopes": SLOPES.astype(np.float64)}),
                 "'alibi_slopes' has dtype f64; expected f32")
    expect_error(lambda: kiln.attention(q, k, v, mods="alibi", mod_tensors={"alibi_slopes": np.zeros(3, np.float32)}),
                 "'alibi_slopes' has extent 3", "H=2")
    expect_error(lambda: kiln.attention(q, k, v, mods="document", mod_tensors={"q_doc": Q_DOC, "kv_doc": Q_DOC}),
                 "'kv_doc' has extent 40", "N_K=48")
    expect_error(lambda: kiln.attention(q, k, v, mods="causal", mod_tensors={"bias": SLOPES}),
                 "'bias', which no mod of")
    expect_error(lambda: kiln.attention(q, k, v, mod_tensors={"sinks": SINKS}), "options.mods is empty")
    expect_error(lambda: kiln.attention(q, k, v, mods=3), "mods must be None, a mod spec string")
    expect_error(lambda: kiln.attention(q, k, v, mods=["causal", 2]), "mods must be None")
    expect_error(lambda: kiln.attention(q, k, v, mods="alibi", mod_tensors=[SLOPES]),
                 "mod_tensors must be None or a dict")
    expect_error(lambda: kiln.attention(q, k, v, mods="alibi", mod_tensors={1: SLOPES}), "names must be non-empty")
    expect_error(lambda: kiln.attention(q, k, v, mods="alibi", mod_tensors={"alibi_slopes": [0.5, 0.1]}),
                 "mod_tensors['alibi_slopes']", "got list")
    expect_error(lambda: kiln.attention_backward(dout, q, k, v, o, lse, return_dsink=True), "options.dsink",
                 "no sink")
    expect_error(lambda: kiln.attention_backward(dout, q, k, v, o, lse, return_dsink=1), "return_dsink must be")
    expect_error(lambda: kiln.attention_backward(dout, q, k, v, o, lse, mods="softcap=0"), "cap is 0",
                 "above 0")


def test_sinks_gradient_without_rows_is_zero():
    q, k, v, dout = inputs(n_q=0)
    tensors = {"sinks": SINKS}
    o, lse = kiln.attention(q, k, v, mods="sinks", mod_tensors=tensors, return_lse=True)
    dq, dk, dv, dsink = kiln.attention_backward(dout, q, k, v, o, lse, mods="sinks", mod_tensors=tensors,
                                                return_dsink=True)
    assert dq.shape == q.shape and np.all(dk == 0) and np.all(dv == 0)
    assert dsink.shape == (H,) and np.all(dsink == 0)
