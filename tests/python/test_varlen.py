"""kiln.attention_varlen and kiln.attention_varlen_backward on NumPy arrays (kiln's interpreter) against the
float64 reference, sequence by sequence: sequences of different lengths, one without rows and one without keys,
both causal alignments, GQA, a strided view, mods applied per sequence; and argument mistakes as KilnError
carrying kiln's message. Shapes are small: the suite runs on a 2-core CI machine."""

import numpy as np
import pytest

import kiln
import reference
from test_errors import raises

FWD_TOL = {np.float32: 1e-5, np.float16: 2e-3}
BWD_TOL = {np.float32: 1e-4, np.float16: 1e-2}

# (seqlens_q, seqlens_k, H, H_KV, D, dtype, causal)
CASES = [
    ([5, 0, 17], [7, 3, 17], 2, 2, 16, np.float32, None),              # a sequence without rows
    ([9, 12, 3], [20, 4, 0], 4, 2, 32, np.float16, "bottom-right"),    # GQA; rows that see no key; no keys
    ([6, 11], [6, 11], 2, 1, 16, np.float32, "top-left"),              # MQA
]


def case_id(c):
    return f"q{c[0]}-k{c[1]}-H{c[2]}-Hkv{c[3]}-D{c[4]}-{np.dtype(c[5]).name}-{c[6] or 'none'}"


def offsets(lens):
    return np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)


def packed(case, seed=0):
    lq, lk, h, hkv, d, dt, _ = case
    rng = np.random.default_rng(seed)
    q = rng.uniform(-1, 1, (sum(lq), h, d)).astype(dt)
    k, v = (rng.uniform(-1, 1, (sum(lk), hkv, d)).astype(dt) for _ in range(2))
    return q, k, v, offsets(lq), offsets(lk), max(lq), max(lk)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_forward_and_backward_match_reference(case):
    q, k, v, cu_q, cu_k, max_q, max_k = packed(case)
    causal, dt = case[6], case[5]
    o, lse = kiln.attention_varlen(q, k, v, cu_q, cu_k, max_q, max_k, causal=causal, return_lse=True)
    assert o.shape == q.shape and o.dtype == q.dtype and lse.shape == (q.shape[1], q.shape[0])
    ref_o, ref_lse = reference.varlen_forward(q, k, v, cu_q, cu_k, causal=causal)
    assert reference.rel_l2(o, ref_o) < FWD_TOL[dt]
    assert reference.rel_l2(lse, ref_lse) < 1e-5
    unseen = np.isneginf(ref_lse).T  # (total_q, H): rows that see no key
    assert np.all(o[unseen] == 0)

    dout = np.random.default_rng(3).uniform(-1, 1, q.shape).astype(dt)
    dq, dk, dv = kiln.attention_varlen_backward(dout, q, k, v, o, lse, cu_q, cu_k, max_q, max_k, causal=causal)
    for mine, ref in zip((dq, dk, dv), reference.varlen_backward(dout, q, k, v, cu_q, cu_k, causal=causal)):
        assert mine.shape == ref.shape and mine.dtype == q.dtype
        assert reference.rel_l2(mine, ref) < BWD_TOL[dt]
    assert np.all(dq[unseen] == 0)  # rows that see no key get no gradient


def test_strided_views_and_scale():
    """q, k, v as views whose token stride is not heads·D (every other head of a wider tensor), o written into a
    view too: kiln follows the strides."""
    case = CASES[0]
    q, k, v, cu_q, cu_k, max_q, max_k = packed(case, seed=5)
    wide = [np.repeat(x, 2, axis=1) for x in (q, k, v)]
    views = [w[:, ::2] for w in wide]
    assert not views[0].flags.c_contiguous
    o = kiln.attention_varlen(*views, cu_q, cu_k, max_q, max_k, scale=0.3)
    ref_o, _ = reference.varlen_forward(q, k, v, cu_q, cu_k, scale=0.3)
    assert reference.rel_l2(o, ref_o) < 1e-5


def test_one_sequence_equals_dense_attention():
    """A packed batch of one sequence is the dense kernel's problem in bshd layout."""
    q, k, v, cu_q, cu_k, max_q, max_k = packed(([13], [21], 2, 2, 16, np.float32, None), seed=2)
    o, lse = kiln.attention_varlen(q, k, v, cu_q, cu_k, max_q, max_k, causal="bottom-right", return_lse=True)
    od, lsed = kiln.attention(q[None], k[None], v[None], causal="bottom-right", layout="bshd", return_lse=True)
    np.testing.assert_allclose(o, od[0], rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(lse, lsed[0], rtol=1e-6, atol=1e-6)


def test_mods_apply_per_sequence():
    """softcap and a sliding window on a packed batch equal kiln.attention with the same mods on each sequence."""
    lq = [10, 7]
    q, k, v, cu_q, cu_k, max_q, max_k = packed((lq, lq, 2, 2, 16, np.float32, None), seed=4)
    mods = "sliding_window=3,0;softcap=2"
    o = kiln.attention_varlen(q, k, v, cu_q, cu_k, max_q, max_k, mods=mods)
    for b in range(len(lq)):
        s = slice(cu_q[b], cu_q[b + 1])
        dense = kiln.attention(q[None, s], k[None, s], v[None, s], layout="bshd", mods=mods)
        np.testing.assert_allclose(o[s], dense[0], rtol=1e-5, atol=1e-6)


def test_empty_batch_and_no_rows():
    q = np.zeros((0, 2, 16), np.float32)
    k = np.zeros((4, 2, 16), np.float32)
    o, lse = kiln.attention_varlen(q, k, k, offsets([0, 0]), offsets([2, 2]), 0, 2, return_lse=True)
    assert o.shape == (0, 2, 16) and lse.shape == (2, 0)
    dq, dk, dv = kiln.attention_varlen_backward(q, q, k, k, o, lse, offsets([0, 0]), offsets([2, 2]), 0, 2)
    assert dq.shape == (0, 2, 16) and np.all(dk == 0) and np.all(dv == 0)


def test_argument_mistakes_are_kiln_errors():
    q, k, v, cu_q, cu_k, max_q, max_k = packed(CASES[0])
    call = kiln.attention_varlen
    raises(lambda: call(q, k, v, cu_q.astype(np.int64), cu_k, max_q, max_k), "cu_seqlens_q has dtype i64",
           "expected i32")
    raises(lambda: call(q, k, v, cu_q, cu_k[:-1], max_q, max_k), "B + 1 of each")
    bad = cu_q.copy()
    bad[-1] -= 1
    raises(lambda: call(q, k, v, bad, cu_k, max_q, max_k), "cu_seqlens_q[B] = 21", "q holds 22 tokens")
    raises(lambda: call(q, k, v, cu_q, cu_k, 16, max_k), "sequence 2 has 17 tokens", "max_seqlen_q is 16")
    raises(lambda: call(q[None], k, v, cu_q, cu_k, max_q, max_k), "q must have rank 3")
    raises(lambda: call(q, k, v, cu_q, cu_k, 17.0, max_k), "max_seqlen_q must be an int")
    raises(lambda: call(q, k, v, cu_q, cu_k, max_q, max_k, causal="diagonal"), "causal must be")
    raises(lambda: call(q, k, v, cu_q, cu_k, max_q, max_k, mods="softcap=2;flash"), "unknown mod 'flash'")
    raises(lambda: call(q, k, v, list(cu_q), cu_k, max_q, max_k), "cu_seqlens_q: expected NumPy arrays")
    raises(lambda: call(q, k[:, :1], v, cu_q, cu_k, max_q, max_k), "v")
    o, lse = call(q, k, v, cu_q, cu_k, max_q, max_k, return_lse=True)
    raises(lambda: kiln.attention_varlen_backward(q, q, k, v, o, lse[:, 1:], cu_q, cu_k, max_q, max_k),
           "attention::backward_varlen", "lse has shape")
